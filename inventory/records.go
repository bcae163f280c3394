package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
)

// The records a sale keeps besides its stock: buy outcome counts and the
// users first refused for their cap (the merchant's dashboard), users'
// proof-of-work challenges, and turns at periodic chores.

// recordsTTL bounds the life of a sale's outcome records after their last
// update.
const recordsTTL = 7 * 24 * time.Hour

// AddOutcomes adds outcome counts (by sale and name) and users refused
// for their cap (by sale, with when that first happened, in unix ms) to
// the sales' records, as gathered by one process since it last wrote them
// (sales.Outcomes). Only the first keep capped users of a sale are kept.
func (s *Store) AddOutcomes(ctx context.Context, counts, capped map[int64]map[string]int64, keep int64) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sale, m := range counts {
			key := s.keys.Outcomes(sale)
			for name, n := range m {
				p.HIncrBy(ctx, key, name, n)
			}
			p.Expire(ctx, key, recordsTTL)
		}
		for sale, m := range capped {
			key := s.keys.Capped(sale)
			zs := make([]redis.Z, 0, len(m))
			for user, at := range m {
				zs = append(zs, redis.Z{Score: float64(at), Member: user})
			}
			p.ZAddNX(ctx, key, zs...)
			p.ZRemRangeByRank(ctx, key, keep, -1) // keep the first ones
			p.Expire(ctx, key, recordsTTL)
		}
		return nil
	})
	if err != nil {
		return failed("add outcomes", err)
	}
	return nil
}

// Outcomes returns a sale's outcome counts across all processes (as of
// their last AddOutcomes).
func (s *Store) Outcomes(ctx context.Context, sale int64) (map[string]int64, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Outcomes(sale)).Result()
	if err != nil {
		return nil, failed(fmt.Sprintf("outcomes of sale %d", sale), err)
	}
	out := make(map[string]int64, len(m))
	for name, v := range m {
		out[name] = toInt(v)
	}
	return out, nil
}

// FirstCapped returns the first n users of a sale refused for their cap.
func (s *Store) FirstCapped(ctx context.Context, sale int64, n int64) ([]seckill.CappedUser, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Capped(sale), 0, n-1).Result()
	if err != nil {
		return nil, failed(fmt.Sprintf("capped users of sale %d", sale), err)
	}
	out := make([]seckill.CappedUser, len(zs))
	for i, z := range zs {
		out[i] = seckill.CappedUser{UserID: fmt.Sprint(z.Member), At: time.UnixMilli(int64(z.Score)).UTC()}
	}
	return out, nil
}

// PutChallenge keeps user's proof-of-work challenge for sale, with its
// difficulty, for ttl; it replaces the user's last one.
func (s *Store) PutChallenge(ctx context.Context, sale int64, user, ch string, difficulty int, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.keys.Challenge(sale, user), encodeChallenge(ch, difficulty), ttl).Err(); err != nil {
		return failed("keep a challenge", err)
	}
	return nil
}

// TakeChallenge removes and returns user's challenge for sale and its
// difficulty; ok is false when there is none (expired, used, never issued,
// or unreadable).
func (s *Store) TakeChallenge(ctx context.Context, sale int64, user string) (ch string, difficulty int, ok bool, err error) {
	v, err := s.rdb.GetDel(ctx, s.keys.Challenge(sale, user)).Result()
	if errors.Is(err, redis.Nil) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, failed("take a challenge", err)
	}
	ch, difficulty, err = decodeChallenge(v)
	return ch, difficulty, err == nil, nil // a malformed record is no challenge
}

// TakeTurn reports whether this process takes its turn at chore for sale:
// true for the first to ask within ttl, across processes.
func (s *Store) TakeTurn(ctx context.Context, chore string, sale int64, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.keys.Turn(chore, sale), "1", ttl).Result()
	if err != nil {
		return false, failed("take a turn", err)
	}
	return ok, nil
}
