// Package room is a sale's waiting room (API.md, Waiting room): shoppers
// join a queue instead of racing for the buy button, those who come before
// the start in a random order, later ones in arrival order, and the room
// lets admit_per_second places in each second from the start. An admitted
// shopper gets an admission pass, signed and bound to user and sale, that
// the buy path checks without a round trip (package tickets); it serves
// several buys, up to the per-user cap.
//
// The queue lives in Redis (inventory.Store, queue.lua): one atomic step
// per join or read, admission derived from the clock, so several server
// processes admit no faster than one and none of them has to live.
package room

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/signed"
)

// Passes are the admission passes' kind of token: Passes.Key(secret)
// signs them (a buy ticket is never good as a pass, nor a pass as a
// ticket).
const Passes signed.Kind = "seckill admission passes v1"

// Store keeps the waiting rooms (inventory.Store).
type Store interface {
	JoinQueue(ctx context.Context, sale int64, user string, now time.Time, gone bool) (seckill.Queue, error)
	ReadQueue(ctx context.Context, sale int64, user string, now time.Time, gone bool) (seckill.Queue, error)
}

// Sales reads a sale's settings (sales.Service).
type Sales interface {
	// Rules is the sale's stock as of at most a second ago.
	Rules(ctx context.Context, sale int64) (seckill.Stock, error)
}

// Service runs the waiting rooms.
type Service struct {
	store  Store
	sales  Sales
	passes *signed.Signer
	ttl    time.Duration
	now    func() time.Time
}

// New returns a service signing passes with key (see Key) that serve for
// ttl.
func New(store Store, sales Sales, key []byte, ttl time.Duration, now func() time.Time) *Service {
	return &Service{store: store, sales: sales, passes: signed.NewSigner(key), ttl: ttl, now: now}
}

// Standing is where a shopper stands in a sale's room, as API.md answers
// it.
type Standing struct {
	SaleID int64
	seckill.Queue
	Status seckill.QueueStatus
	// ETA is the estimated wait until the shopper's turn (0 once it came).
	ETA time.Duration
	// Pass serves the shopper's buys until PassExpiresAt, once admitted.
	Pass          string
	PassExpiresAt time.Time
}

// Join puts user in the sale's queue (again: the same place) and returns
// where they stand. Refusals: seckill.ErrNotStarted before the queue
// opens, ErrSoldOut once the stock is gone, ErrEnded, ErrNotFound for a
// sale without a room, ErrSaleNotFound.
func (s *Service) Join(ctx context.Context, sale int64, user string) (Standing, error) {
	return s.step(ctx, sale, user, s.store.JoinQueue)
}

// Read returns where user stands in the sale's room (not_in_queue before
// they join).
func (s *Service) Read(ctx context.Context, sale int64, user string) (Standing, error) {
	return s.step(ctx, sale, user, s.store.ReadQueue)
}

// Watch returns the sale's room as every watcher sees it (no place), for
// the live frames.
func (s *Service) Watch(ctx context.Context, sale int64) (seckill.Queue, error) {
	st, err := s.rules(ctx, sale)
	if err != nil {
		return seckill.Queue{}, err
	}
	return s.store.ReadQueue(ctx, sale, "", s.now(), gone(st, s.now()))
}

type stepFunc func(ctx context.Context, sale int64, user string, now time.Time, gone bool) (seckill.Queue, error)

func (s *Service) step(ctx context.Context, sale int64, user string, fn stepFunc) (Standing, error) {
	st, err := s.rules(ctx, sale)
	if err != nil {
		return Standing{}, err
	}
	now := s.now()
	q, err := fn(ctx, sale, user, now, gone(st, now))
	if err != nil {
		return Standing{}, unavailable(err)
	}
	out := Standing{SaleID: sale, Queue: q, Status: q.Status(), ETA: eta(q, st, now)}
	if out.Status == seckill.QueueAdmitted {
		out.PassExpiresAt = now.Add(s.ttl).Truncate(time.Second)
		out.Pass = s.passes.Mint(user, sale, out.PassExpiresAt)
	}
	return out, nil
}

// rules reads the sale's settings and refuses a sale without a room
// without asking Redis.
func (s *Service) rules(ctx context.Context, sale int64) (seckill.Stock, error) {
	st, err := s.sales.Rules(ctx, sale)
	switch {
	case err != nil:
		return st, unavailable(err)
	case !st.WaitingRoom:
		return st, seckill.Errorf(seckill.CodeNotFound, "Sale %d has no waiting room: buy directly.", sale)
	}
	return st, nil
}

// gone says whether the sale's stock is gone, as of its rules: the room
// then lets nobody more in (stock a cancelled order returns lets it go on).
func gone(st seckill.Stock, now time.Time) bool {
	return st.PhaseAt(now) == seckill.PhaseSoldOut
}

// eta estimates the wait of q's shopper: until the start, then a place a
// 1/admit_per_second.
func eta(q seckill.Queue, st seckill.Stock, now time.Time) time.Duration {
	if q.Place == 0 || q.Place <= q.AdmittedThrough || st.AdmitPerSecond <= 0 {
		return 0
	}
	d := time.Duration(float64(q.Place-q.AdmittedThrough) / float64(st.AdmitPerSecond) * float64(time.Second))
	if now.Before(st.Start) {
		d += st.Start.Sub(now)
	}
	return d
}

// Seconds is a wait in whole seconds, rounded up.
func Seconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

// unavailable marks a failure of Redis as the backing service's (503:
// retry), unless it is a refusal with a code of its own.
func unavailable(err error) error {
	if seckill.CodeOf(err) == seckill.CodeInternal {
		return fmt.Errorf("room: %w: %w", seckill.ErrUnavailable, err)
	}
	return err
}
