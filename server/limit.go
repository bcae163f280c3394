package server

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is one token bucket per key (user id or client IP), with a burst
// of one second's worth. Idle buckets are evicted, so memory is bounded by
// the keys seen in the last idle period.
type limiter struct {
	limit  rate.Limit
	burst  int
	seed   maphash.Seed
	shards [32]limiterShard
}

type limiterShard struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// newLimiter returns a keyed limiter of perSecond requests per key with a
// burst of burst (0: one second's worth), or nil (no limit) for a rate of 0.
func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = burstOf(perSecond)
	}
	l := &limiter{limit: rate.Limit(perSecond), burst: burst, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[string]*bucket{}
	}
	return l
}

func burstOf(perSecond float64) int { return max(1, int(math.Ceil(perSecond))) }

func (l *limiter) reserve(key string, now time.Time) *rate.Reservation {
	s := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	s.mu.Lock()
	b, ok := s.m[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		s.m[key] = b
	}
	b.last = now
	s.mu.Unlock()
	return b.lim.ReserveN(now, 1)
}

// evict drops buckets unused since before cutoff; they would be full again.
func (l *limiter) evict(cutoff time.Time) (n int) {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, b := range s.m {
			if b.last.Before(cutoff) {
				delete(s.m, k)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

func (l *limiter) size() (n int) {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// limits are the buy limiters: per client IP, per user and global. A request
// passes only if all of them have a token; a refusal by one gives back the
// tokens the others reserved.
type limits struct {
	global *rate.Limiter
	perIP  *limiter
	user   *limiter
}

func newLimits(global, perUser, perIP float64) *limits {
	l := &limits{perIP: newLimiter(perIP, 0), user: newLimiter(perUser, 0)}
	if global > 0 {
		l.global = rate.NewLimiter(rate.Limit(global), burstOf(global))
	}
	return l
}

// allow reports whether a buy from user at ip may go ahead now, and if not,
// how long until it could.
func (l *limits) allow(user, ip string, now time.Time) (bool, time.Duration) {
	var rs [3]*rate.Reservation
	n := 0
	if l.perIP != nil {
		rs[n] = l.perIP.reserve(ip, now)
		n++
	}
	if l.user != nil {
		rs[n] = l.user.reserve(user, now)
		n++
	}
	if l.global != nil {
		rs[n] = l.global.ReserveN(now, 1)
		n++
	}
	var wait time.Duration
	for _, r := range rs[:n] {
		wait = max(wait, r.DelayFrom(now))
	}
	if wait == 0 {
		return true, 0
	}
	for _, r := range rs[:n] {
		r.CancelAt(now)
	}
	return false, wait
}

// evict drops idle per-key buckets.
func (l *limits) evict(now time.Time) {
	cutoff := now.Add(-time.Minute)
	for _, k := range []*limiter{l.perIP, l.user} {
		if k != nil {
			k.evict(cutoff)
		}
	}
}
