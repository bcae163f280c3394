package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/inventory"
)

// outcomes counts buy outcomes per sale in memory and adds them to the
// sale's outcomes hash in Redis once a second, so the merchant's dashboard
// sees every server process without a Redis write per request.
type outcomes struct {
	rdb  redis.UniversalClient
	keys inventory.Keys

	mu     sync.Mutex
	counts map[int64]map[string]int64
	// capped has, per sale, the users refused for their per-user cap since
	// the last flush, with the first time (unix ms): the accounts of a bot
	// farm hit their caps within moments of the opening.
	capped map[int64]map[string]int64
}

func newOutcomes(rdb redis.UniversalClient, keys inventory.Keys) *outcomes {
	return &outcomes{rdb: rdb, keys: keys, counts: map[int64]map[string]int64{}, capped: map[int64]map[string]int64{}}
}

// maxCapped is how many of a sale's first capped users are kept.
const maxCapped = 100

// hitCap notes that user was refused for their cap on sale at now.
func (o *outcomes) hitCap(sale int64, user string, now time.Time) {
	o.mu.Lock()
	o.hitCapLocked(sale, user, now.UnixMilli())
	o.mu.Unlock()
}

func (o *outcomes) hitCapLocked(sale int64, user string, at int64) {
	m := o.capped[sale]
	if m == nil {
		m = map[string]int64{}
		o.capped[sale] = m
	}
	if first, seen := m[user]; (!seen && len(m) < maxCapped) || (seen && at < first) {
		m[user] = at
	}
}

func (o *outcomes) add(sale int64, code string) {
	o.mu.Lock()
	m := o.counts[sale]
	if m == nil {
		m = map[string]int64{}
		o.counts[sale] = m
	}
	m[code]++
	o.mu.Unlock()
}

// outcomesTTL bounds the life of a sale's outcome counters after their last
// update.
const outcomesTTL = 7 * 24 * time.Hour

// flush writes the counts gathered since the last flush. Counts that could
// not be written are kept for the next one.
func (o *outcomes) flush(ctx context.Context) error {
	o.mu.Lock()
	counts, capped := o.counts, o.capped
	o.counts, o.capped = map[int64]map[string]int64{}, map[int64]map[string]int64{}
	o.mu.Unlock()
	if len(counts) == 0 && len(capped) == 0 {
		return nil
	}
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sale, m := range counts {
			key := o.keys.Outcomes(sale)
			for code, n := range m {
				p.HIncrBy(ctx, key, code, n)
			}
			p.Expire(ctx, key, outcomesTTL)
		}
		for sale, m := range capped {
			key := o.keys.Capped(sale)
			zs := make([]redis.Z, 0, len(m))
			for user, at := range m {
				zs = append(zs, redis.Z{Score: float64(at), Member: user})
			}
			p.ZAddNX(ctx, key, zs...)
			p.ZRemRangeByRank(ctx, key, maxCapped, -1) // keep the first ones
			p.Expire(ctx, key, outcomesTTL)
		}
		return nil
	})
	if err != nil {
		o.mu.Lock()
		for sale, m := range counts {
			for code, n := range m {
				if o.counts[sale] == nil {
					o.counts[sale] = map[string]int64{}
				}
				o.counts[sale][code] += n
			}
		}
		for sale, m := range capped {
			for user, at := range m {
				o.hitCapLocked(sale, user, at)
			}
		}
		o.mu.Unlock()
		return fmt.Errorf("server: flush outcomes: %w", err)
	}
	return nil
}

// read returns the outcome counts of a sale across all processes (as of
// their last flush).
func (o *outcomes) read(ctx context.Context, sale int64) (map[string]int64, error) {
	m, err := o.rdb.HGetAll(ctx, o.keys.Outcomes(sale)).Result()
	if err != nil {
		return nil, fmt.Errorf("server: outcomes of sale %d: %w", sale, err)
	}
	out := map[string]int64{"ok": 0, "sold_out": 0, "limit_exceeded": 0, "rate_limited": 0}
	for code, v := range m {
		var n int64
		fmt.Sscan(v, &n)
		out[code] = n
	}
	return out, nil
}

// cappedUser is a user refused for their cap, and when that first happened.
type cappedUser struct {
	UserID string    `json:"user_id"`
	At     time.Time `json:"at"`
}

// firstCapped returns the first n users of a sale refused for their cap.
func (o *outcomes) firstCapped(ctx context.Context, sale int64, n int64) ([]cappedUser, error) {
	zs, err := o.rdb.ZRangeWithScores(ctx, o.keys.Capped(sale), 0, n-1).Result()
	if err != nil {
		return nil, fmt.Errorf("server: capped users of sale %d: %w", sale, err)
	}
	out := make([]cappedUser, len(zs))
	for i, z := range zs {
		out[i] = cappedUser{UserID: fmt.Sprint(z.Member), At: time.UnixMilli(int64(z.Score)).UTC()}
	}
	return out, nil
}

// defence is what a sale's bot defence saw (API.md, buy tickets): buys
// refused for a missing or bad ticket, challenges issued and solved,
// tickets issued, and the users first refused for their cap.
type defence struct {
	TicketRequired   int64        `json:"ticket_required"`
	TicketInvalid    int64        `json:"ticket_invalid"`
	ChallengesIssued int64        `json:"challenges_issued"`
	ChallengesSolved int64        `json:"challenges_solved"`
	PowInvalid       int64        `json:"pow_invalid"`
	TicketsIssued    int64        `json:"tickets_issued"`
	FirstCapped      []cappedUser `json:"first_capped"`
}

// defenceOf takes the ticket and challenge counters out of a sale's
// outcome counts (they count requests to other routes than buy).
func defenceOf(out map[string]int64) defence {
	d := defence{TicketRequired: out["ticket_required"], TicketInvalid: out["ticket_invalid"]}
	for code, n := range map[string]*int64{"challenge_issued": &d.ChallengesIssued, "challenge_solved": &d.ChallengesSolved,
		"pow_invalid": &d.PowInvalid, "ticket_issued": &d.TicketsIssued} {
		*n = out[code]
		delete(out, code)
	}
	return d
}

// FlushOutcomes writes the outcome counts gathered so far to Redis, as the
// server's background loop does once a second (for tests and tools that
// serve the Handler without Run).
func (s *Server) FlushOutcomes(ctx context.Context) error { return s.outcomes.flush(ctx) }
