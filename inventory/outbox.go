package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/orders"
)

// OutboxEntries returns every entry of a sale's outbox stream: O(outbox),
// for the reconciler looking for a missing order.
func (s *Store) OutboxEntries(ctx context.Context, sale int64) ([]redis.XMessage, error) {
	entries, err := s.rdb.XRange(ctx, s.keys.Outbox(sale), "-", "+").Result()
	if err != nil {
		return nil, fmt.Errorf("inventory: outbox of sale %d: %w", sale, err)
	}
	return entries, nil
}

// ParseOutboxEntry reads an entry of a sale's outbox stream as buy.lua
// writes it: one field "e" holding one line per order accepted by the
// call, order_id|sale_id|user_id|qty|price|request_id|ts (none of the
// parts can contain "|" or a line break). One entry per call rather than
// per order keeps the script's writes to one XADD, whatever the batch.
func ParseOutboxEntry(values map[string]any) ([]orders.Event, error) {
	s, _ := values["e"].(string)
	if s == "" {
		return nil, fmt.Errorf("inventory: outbox entry %v is not an order event", values)
	}
	lines := strings.Split(s, "\n")
	evs := make([]orders.Event, len(lines))
	for i, line := range lines {
		ev, err := parseOutboxLine(line)
		if err != nil {
			return nil, err
		}
		evs[i] = ev
	}
	return evs, nil
}

func parseOutboxLine(s string) (orders.Event, error) {
	p := strings.Split(s, "|")
	if len(p) != 7 {
		return orders.Event{}, fmt.Errorf("inventory: outbox line %q is not an order event", s)
	}
	num := func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }
	ev := orders.Event{OrderID: p[0], UserID: p[2], RequestID: p[5]}
	var errs [4]error
	ev.SaleID, errs[0] = num(p[1])
	ev.Qty, errs[1] = num(p[3])
	ev.PriceCents, errs[2] = num(p[4])
	ev.At, errs[3] = num(p[6])
	if err := errors.Join(errs[:]...); err != nil {
		return orders.Event{}, fmt.Errorf("inventory: outbox line %q: %w", s, err)
	}
	return ev, nil
}
