package inventory

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// OutboxEntry is an entry of a part's outbox stream: the orders one buy
// call accepted (DecodeOutbox reads them).
type OutboxEntry struct {
	Part Part
	redis.XMessage
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
		msgs, err := s.rdb.XRange(ctx, s.keys.Of(p).Outbox(), "-", "+").Result()
		if err != nil {
			return nil, failed(fmt.Sprintf("outbox of sale %d (part %s)", sale, p.Tag), err)
		}
		for _, m := range msgs {
			out = append(out, OutboxEntry{Part: p, XMessage: m})
		}
	}
	return out, nil
}
