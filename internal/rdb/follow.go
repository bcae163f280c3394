package rdb

import (
	"context"
	"log/slog"
	"time"
)

// Follow hands each message of a pub/sub channel to handle until ctx ends,
// subscribing again after a connection loss. Messages published while
// nobody listened are lost, so every time the subscription is (re)made it
// first calls caughtUp, for the caller to re-read or drop what it follows;
// an error there is retried like a failed subscription.
func Follow(ctx context.Context, c Client, channel string, caughtUp func(context.Context) error, handle func(payload string)) {
	for ctx.Err() == nil {
		sub := c.Subscribe(ctx, channel)
		_, err := sub.Receive(ctx)
		if err == nil {
			err = caughtUp(ctx)
		}
		if err != nil {
			sub.Close()
			if ctx.Err() == nil {
				slog.Warn("rdb: following a channel failed; retrying", "channel", channel, "err", err)
				t := time.NewTimer(time.Second)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
			continue
		}
		ch := sub.Channel()
	listen:
		for {
			select {
			case <-ctx.Done():
				break listen
			case msg, ok := <-ch:
				if !ok {
					break listen
				}
				handle(msg.Payload)
			}
		}
		sub.Close()
	}
}
