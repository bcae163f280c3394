package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
)

// The outbox. Each part of a sale has an outbox stream (rdb.Outbox):
// buy.lua appends one entry per call that accepted orders, in the same
// atomic step as the decrement, so no accepted order exists without its
// entry. The relay (package worker) reads, claims and acknowledges the
// entries through these methods.

// OutboxEntry is an entry of a part's outbox stream: the orders one buy
// call accepted.
type OutboxEntry struct {
	Part Part
	rdb.Entry
}

// Events returns the orders the entry carries.
func (e OutboxEntry) Events() ([]seckill.Event, error) { return DecodeOutbox(e.Values) }

// Trace is the traceparent of the buy call that appended the entry, ""
// when it was not traced.
func (e OutboxEntry) Trace() string {
	tp, _ := e.Values[OutboxTraceField].(string)
	return tp
}

func (s *Store) outbox(p Part) rdb.Outbox {
	return rdb.NewOutbox(s.rdb, s.keys, s.partKeys(p).Outbox())
}

// Beat records that the relay named consumer is alive for the next ttl
// (rdb.Beat).
func (s *Store) Beat(ctx context.Context, consumer string, ttl time.Duration) error {
	return rdb.Beat(ctx, s.rdb, s.keys, consumer, ttl)
}

func ofPart(p Part, es []rdb.Entry) []OutboxEntry {
	out := make([]OutboxEntry, len(es))
	for i, e := range es {
		out[i] = OutboxEntry{Part: p, Entry: e}
	}
	return out
}

// Outbox returns every entry of a sale's outbox streams, part by part:
// O(outbox), for the reconciler looking for a missing order.
func (s *Store) Outbox(ctx context.Context, sale int64) ([]OutboxEntry, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return nil, err
	}
	var out []OutboxEntry
	for _, p := range parts {
		es, err := s.outbox(p).All(ctx)
		if err != nil {
			return nil, failed(fmt.Sprintf("outbox of sale %d (part %s)", sale, p.Tag), err)
		}
		out = append(out, ofPart(p, es)...)
	}
	return out, nil
}

// OutboxOldest returns when the oldest entry still in a part's outbox was
// appended; ok is false when the outbox is empty.
func (s *Store) OutboxOldest(ctx context.Context, p Part) (at time.Time, ok bool, err error) {
	at, ok, err = s.outbox(p).Oldest(ctx)
	if err != nil {
		return time.Time{}, false, failed("oldest outbox entry of part "+p.Tag, err)
	}
	return at, ok, nil
}

// OutboxAfter returns up to n entries of a part's outbox appended after
// the entry id (see rdb.Outbox.After).
func (s *Store) OutboxAfter(ctx context.Context, p Part, id string, n int) ([]OutboxEntry, error) {
	es, err := s.outbox(p).After(ctx, id, n)
	if err != nil {
		return nil, failed("read the outbox of part "+p.Tag, err)
	}
	return ofPart(p, es), nil
}

// ReadOutbox reads up to n entries of a part's outbox for consumer (see
// rdb.Outbox.Read).
func (s *Store) ReadOutbox(ctx context.Context, p Part, consumer string, what rdb.OutboxRead, n int, block time.Duration) ([]OutboxEntry, error) {
	es, err := s.outbox(p).Read(ctx, consumer, what, n, block)
	if err != nil {
		return nil, failed("read the outbox of part "+p.Tag, err)
	}
	return ofPart(p, es), nil
}

// ClaimOutbox takes over for consumer up to n entries of a part's outbox
// that another consumer left unacknowledged for minIdle or more.
func (s *Store) ClaimOutbox(ctx context.Context, p Part, consumer string, minIdle time.Duration, n int) ([]OutboxEntry, error) {
	es, err := s.outbox(p).Claim(ctx, consumer, minIdle, n)
	if err != nil {
		return nil, failed("claim from the outbox of part "+p.Tag, err)
	}
	return ofPart(p, es), nil
}

// AckOutbox acknowledges and deletes published entries of a part's
// outbox, in one round trip.
func (s *Store) AckOutbox(ctx context.Context, p Part, ids []string) error {
	if err := s.outbox(p).Ack(ctx, ids); err != nil {
		return failed(fmt.Sprintf("remove %d published outbox entries of part %s", len(ids), p.Tag), err)
	}
	return nil
}
