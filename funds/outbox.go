package funds

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
)

// The outbox. Each group has an outbox stream (rdb.Outbox): funds.lua
// appends one entry per movement made, in the same atomic step as the
// balance's move, so no movement exists without its entry. The funds
// relay (package worker) reads, claims and acknowledges the entries
// through these methods.

// Entry is an entry of a group's outbox: one movement.
type Entry struct {
	Group int
	rdb.Entry
}

// Movement decodes the entry's movement.
func (e Entry) Movement() (seckill.Movement, error) {
	s, _ := e.Values[outboxField].(string)
	return DecodeMovement(s)
}

func (s *Store) outbox(g int) rdb.Outbox {
	return rdb.NewOutbox(s.rdb, s.keys, s.keys.Funds(g).Outbox())
}

// Beat records that the relay named consumer is alive for the next ttl
// (rdb.Beat).
func (s *Store) Beat(ctx context.Context, consumer string, ttl time.Duration) error {
	return rdb.Beat(ctx, s.rdb, s.keys, consumer, ttl)
}

func ofGroup(g int, es []rdb.Entry) []Entry {
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = Entry{Group: g, Entry: e}
	}
	return out
}

// Outbox returns every entry of a group's outbox: O(outbox).
func (s *Store) Outbox(ctx context.Context, g int) ([]Entry, error) {
	es, err := s.outbox(g).All(ctx)
	if err != nil {
		return nil, failed(fmt.Sprintf("outbox of group %d", g), err)
	}
	return ofGroup(g, es), nil
}

// Pending lists, in order, the groups whose outbox holds entries (new,
// or read and not yet acknowledged): one pipelined XLEN per group, so the
// relay can sweep every group each second without a read per group.
func (s *Store) Pending(ctx context.Context) ([]int, error) {
	cmds := make([]*redis.IntCmd, s.cfg.Groups)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g := range cmds {
			cmds[g] = p.XLen(ctx, s.keys.Funds(g).Outbox())
		}
		return nil
	})
	if err != nil {
		return nil, failed("read the outboxes' lengths", err)
	}
	var out []int
	for g, c := range cmds {
		if c.Val() > 0 {
			out = append(out, g)
		}
	}
	return out, nil
}

// OutboxOldest returns when the oldest entry still in a group's outbox
// was appended; ok is false when it is empty.
func (s *Store) OutboxOldest(ctx context.Context, g int) (time.Time, bool, error) {
	at, ok, err := s.outbox(g).Oldest(ctx)
	if err != nil {
		return time.Time{}, false, failed(fmt.Sprintf("oldest outbox entry of group %d", g), err)
	}
	return at, ok, nil
}

// OutboxAfter returns up to n entries of a group's outbox appended after
// the entry id (see rdb.Outbox.After).
func (s *Store) OutboxAfter(ctx context.Context, g int, id string, n int) ([]Entry, error) {
	es, err := s.outbox(g).After(ctx, id, n)
	if err != nil {
		return nil, failed(fmt.Sprintf("read the outbox of group %d", g), err)
	}
	return ofGroup(g, es), nil
}

// ReadOutbox reads up to n entries of a group's outbox for consumer (see
// rdb.Outbox.Read).
func (s *Store) ReadOutbox(ctx context.Context, g int, consumer string, what rdb.OutboxRead, n int, block time.Duration) ([]Entry, error) {
	es, err := s.outbox(g).Read(ctx, consumer, what, n, block)
	if err != nil {
		return nil, failed(fmt.Sprintf("read the outbox of group %d", g), err)
	}
	return ofGroup(g, es), nil
}

// ClaimOutbox takes over for consumer up to n entries of a group's outbox
// that another consumer left unacknowledged for minIdle or more.
func (s *Store) ClaimOutbox(ctx context.Context, g int, consumer string, minIdle time.Duration, n int) ([]Entry, error) {
	es, err := s.outbox(g).Claim(ctx, consumer, minIdle, n)
	if err != nil {
		return nil, failed(fmt.Sprintf("claim from the outbox of group %d", g), err)
	}
	return ofGroup(g, es), nil
}

// AckOutbox acknowledges and deletes published entries of a group's
// outbox.
func (s *Store) AckOutbox(ctx context.Context, g int, ids []string) error {
	if err := s.outbox(g).Ack(ctx, ids); err != nil {
		return failed(fmt.Sprintf("remove %d published outbox entries of group %d", len(ids), g), err)
	}
	return nil
}

// Durable returns once the replicas awaited have every write made to
// group g so far, and what its outbox holds is kept (SetPersist): the
// relay asks before it publishes what it read.
func (s *Store) Durable(ctx context.Context, g int) error {
	if err := s.cfg.Replicas.Fence(ctx, s.rdb, s.keys.Funds(g).Fence()); err != nil {
		return failed(fmt.Sprintf("fence of group %d", g), err)
	}
	if s.persist != nil {
		if err := s.persist(ctx, g, ""); err != nil {
			return fmt.Errorf("funds: keep the outbox of group %d: %w: %w", g, seckill.ErrUnavailable, err)
		}
	}
	return nil
}
