package sales

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/wait"
)

// What the bot defence counts besides the buy outcomes (the codes of the
// buys' answers): challenges issued and solved, tickets issued. Refused
// proofs count under seckill.CodePowInvalid.
const (
	ChallengeIssued = "challenge_issued"
	ChallengeSolved = "challenge_solved"
	TicketIssued    = "ticket_issued"
)

// OutcomeStore keeps the outcome counts of every process (inventory.Store).
type OutcomeStore interface {
	AddOutcomes(ctx context.Context, counts, capped map[int64]map[string]int64, keep int64) error
}

// Outcomes counts what each sale's buyers were answered, in memory, and
// adds the counts to the sale's records in Redis once a second (Run), so
// the merchant's dashboard sees every server process without a Redis
// write per request.
type Outcomes struct {
	store OutcomeStore

	mu     sync.Mutex
	counts map[int64]map[string]int64
	// capped has, per sale, the users refused for their per-user cap since
	// the last flush, with the first time (unix ms).
	capped map[int64]map[string]int64
}

// NewOutcomes returns counters that flush to store.
func NewOutcomes(store OutcomeStore) *Outcomes {
	return &Outcomes{store: store, counts: map[int64]map[string]int64{}, capped: map[int64]map[string]int64{}}
}

// maxCapped is how many of a sale's first capped users are kept.
const maxCapped = 100

// Add counts one outcome of a sale: an answer's code, or one of the names
// above.
func (o *Outcomes) Add(sale int64, name string) {
	o.mu.Lock()
	m := o.counts[sale]
	if m == nil {
		m = map[string]int64{}
		o.counts[sale] = m
	}
	m[name]++
	o.mu.Unlock()
}

// HitCap notes that user was refused for their per-user cap on sale at
// now (the sale's first capped users, for the dashboard).
func (o *Outcomes) HitCap(sale int64, user string, now time.Time) {
	o.mu.Lock()
	o.hitCap(sale, user, now.UnixMilli())
	o.mu.Unlock()
}

func (o *Outcomes) hitCap(sale int64, user string, at int64) {
	m := o.capped[sale]
	if m == nil {
		m = map[string]int64{}
		o.capped[sale] = m
	}
	if first, seen := m[user]; (!seen && len(m) < maxCapped) || (seen && at < first) {
		m[user] = at
	}
}

// Flush writes the counts gathered since the last flush. Counts that could
// not be written are kept for the next one.
func (o *Outcomes) Flush(ctx context.Context) error {
	o.mu.Lock()
	counts, capped := o.counts, o.capped
	o.counts, o.capped = map[int64]map[string]int64{}, map[int64]map[string]int64{}
	o.mu.Unlock()
	if len(counts) == 0 && len(capped) == 0 {
		return nil
	}
	if err := o.store.AddOutcomes(ctx, counts, capped, maxCapped); err != nil {
		o.mu.Lock()
		for sale, m := range counts {
			for name, n := range m {
				if o.counts[sale] == nil {
					o.counts[sale] = map[string]int64{}
				}
				o.counts[sale][name] += n
			}
		}
		for sale, m := range capped {
			for user, at := range m {
				o.hitCap(sale, user, at)
			}
		}
		o.mu.Unlock()
		return err
	}
	return nil
}

// Run flushes once a second until ctx ends, and once more then.
func (o *Outcomes) Run(ctx context.Context) {
	wait.Every(ctx, time.Second, func() {
		if err := o.Flush(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("outcome flush failed", "err", err)
		}
	})
	// Counts gathered since the last tick still belong on the dashboard.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := o.Flush(fctx); err != nil {
		slog.Warn("final outcome flush failed", "err", err)
	}
}
