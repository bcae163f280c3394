package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/wait"
)

// Hot-sale buckets. One sale is one hash slot, so one hot sale is bounded
// by one Redis core however large the cluster. A sale created with
// buckets: K keeps K parts, each a stock hash with its own keys and hash
// tag, placed on different masters, its units split between them. Each
// user is pinned to one part by a hash of the user id (partFor, the one
// place that maps a user to a part), so the per-user cap and idempotency
// stay inside one atomic script. When a user's part runs out while others
// have units, units are moved over (move.lua, then accept.lua) and the
// request is decided again; sold_out is answered only when every part is
// empty. A rebalancer evens the parts out in the background.

// Part is one stock part of a sale: its sale id and its hash tag.
type Part struct {
	Sale int64
	Tag  string
}

// First is a sale's first part, the only one of a sale without buckets;
// its stock hash also holds the tags of the others.
func First(sale int64) Part { return Part{Sale: sale, Tag: strconv.FormatInt(sale, 10)} }

// maxCachedSales bounds the cache of sales' parts.
const maxCachedSales = 100_000

// Parts returns a sale's parts, read from its first part's stock hash once
// and cached (they are fixed when the sale is created); seckill.ErrSaleNotFound if
// Redis holds no stock for it.
func (s *Store) Parts(ctx context.Context, sale int64) ([]Part, error) {
	s.mu.Lock()
	parts, ok := s.parts[sale]
	s.mu.Unlock()
	if ok {
		return parts, nil
	}
	v, err := s.rdb.HMGet(ctx, s.partKeys(First(sale)).Stock(), "total", "tags", "instant").Result()
	if err != nil {
		return nil, failed(fmt.Sprintf("parts of sale %d", sale), err)
	}
	if v[0] == nil {
		return nil, fmt.Errorf("inventory: sale %d: %w", sale, seckill.ErrSaleNotFound)
	}
	parts = []Part{First(sale)}
	if tags, _ := v[1].(string); tags != "" {
		for _, t := range strings.Split(tags, ",") {
			parts = append(parts, Part{Sale: sale, Tag: t})
		}
	}
	s.remember(sale, parts, v[2] == "1")
	return parts, nil
}

// remember caches a sale's parts and whether it has instant checkout
// (both fixed at its creation).
func (s *Store) remember(sale int64, parts []Part, instant bool) {
	s.mu.Lock()
	if len(s.parts) >= maxCachedSales {
		clear(s.parts)
		clear(s.seen)
		clear(s.instant)
	}
	s.parts[sale] = parts
	if instant {
		s.instant[sale] = true
	}
	s.mu.Unlock()
}

// Instant reports whether a sale has instant checkout, as its stock hash
// said when its parts were read; false for one Redis does not hold.
func (s *Store) Instant(ctx context.Context, sale int64) bool {
	if _, err := s.Parts(ctx, sale); err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instant[sale]
}

// partIndex is the part a user is pinned to, of k.
func partIndex(k int, user string) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(user))
	return int(h.Sum32() % uint32(k))
}

// Lane is the part of sale that user is pinned to (0 for a sale without
// buckets, or one Redis does not hold): the batcher coalesces each part's
// requests into calls of their own.
func (s *Store) Lane(ctx context.Context, sale int64, user string) int {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return 0
	}
	return partIndex(len(parts), user)
}

// partFor is the part of a sale that holds user's units, requests and
// orders.
func partFor(parts []Part, user string) Part { return parts[partIndex(len(parts), user)] }

// tagList is the first part's record of the others' tags.
func tagList(parts []Part) string {
	tags := make([]string, 0, len(parts)-1)
	for _, p := range parts[1:] {
		tags = append(tags, p.Tag)
	}
	return strings.Join(tags, ",")
}

// place chooses the tags of a new sale's k parts: the first is the sale id;
// on a cluster the others are "<sale>.<n>" with n picked so that the parts
// land on masters not used yet (while there are some), elsewhere n = 1..k-1.
func (s *Store) place(ctx context.Context, sale int64, k int, instant bool) ([]Part, error) {
	parts := []Part{First(sale)}
	cc, cluster := s.rdb.(*redis.ClusterClient) // placing needs the slot map
	used := map[string]bool{}
	var masters int
	if cluster && k > 1 {
		slots, err := cc.ClusterSlots(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("inventory: place sale %d: %w", sale, err)
		}
		owner := func(key string) (string, error) {
			slot, err := cc.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				return "", err
			}
			for _, r := range slots {
				if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
					return r.Nodes[0].Addr, nil
				}
			}
			return "", fmt.Errorf("slot %d has no master", slot)
		}
		seen := map[string]bool{}
		for _, r := range slots {
			if len(r.Nodes) > 0 {
				seen[r.Nodes[0].Addr] = true
			}
		}
		masters = len(seen)
		m, err := owner(s.partKeys(First(sale)).Stock())
		if err != nil {
			return nil, fmt.Errorf("inventory: place sale %d: %w", sale, err)
		}
		used[m] = true
		for n := 1; len(parts) < k && n < 10_000; n++ {
			p := Part{Sale: sale, Tag: fmt.Sprintf("%d.%d", sale, n)}
			m, err := owner(s.partKeys(p).Stock())
			if err != nil {
				return nil, fmt.Errorf("inventory: place sale %d: %w", sale, err)
			}
			if used[m] && len(used) < masters {
				continue
			}
			used[m] = true
			parts = append(parts, p)
		}
	}
	for n := len(parts); len(parts) < k; n++ {
		parts = append(parts, Part{Sale: sale, Tag: fmt.Sprintf("%d.%d", sale, n)})
	}
	s.remember(sale, parts, instant)
	return parts, nil
}

// saw notes how many units a part of a bucketed sale had.
func (s *Store) saw(p Part, units int64) {
	s.mu.Lock()
	s.seen[p] = units
	s.mu.Unlock()
}

// knows reports whether every part has been seen here.
func (s *Store) knows(parts []Part) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		if _, ok := s.seen[p]; !ok {
			return false
		}
	}
	return true
}

// others is how many units the parts of a sale other than parts[n] had when
// last seen here (by a buy call or a refill): an estimate, refreshed by
// every call of this process, that spares a round trip per batch.
func (s *Store) others(parts []Part, n int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t int64
	for i, p := range parts {
		if i != n {
			t += max(0, s.seen[p])
		}
	}
	return t
}

// available reads how many units each part has.
func (s *Store) available(ctx context.Context, parts []Part) ([]int64, error) {
	cmds := make([]*redis.StringCmd, len(parts))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, part := range parts {
			cmds[i] = p.HGet(ctx, s.partKeys(part).Stock(), "available")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, failed(fmt.Sprintf("stock of sale %d", parts[0].Sale), err)
	}
	out := make([]int64, len(parts))
	for i, c := range cmds {
		out[i], _ = c.Int64()
		if len(parts) > 1 {
			s.saw(parts[i], out[i])
		}
	}
	return out, nil
}

func sum(xs []int64) int64 {
	var t int64
	for _, x := range xs {
		t += x
	}
	return t
}

// reserveBuckets decides a batch for a sale with several parts: each
// part's buys in one call (concurrently; the batcher usually hands over
// one part's buys at a time), softly; a part that lacked units gets some
// moved over from the others and decides those buys again. Remaining
// counts are the part's own, exact, plus what the other parts had when
// last seen here.
func (s *Store) reserveBuckets(ctx context.Context, sale int64, parts []Part, buys []seckill.Buy) (seckill.Decision, error) {
	byPart := map[int][]int{}
	for i, b := range buys {
		n := partIndex(len(parts), b.UserID)
		byPart[n] = append(byPart[n], i)
	}
	if !s.knows(parts) {
		if _, err := s.available(ctx, parts); err != nil {
			return seckill.Decision{}, err
		}
	}
	d := seckill.Decision{Answers: make([]seckill.Answer, len(buys))}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for n, is := range byPart {
		wg.Go(func() {
			own, closed, err := s.decidePart(ctx, parts, n, buys, is, d.Answers)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			d.Available += own
			if closed != "" {
				d.Closed = closed
			}
			for _, i := range is {
				if a := &d.Answers[i]; a.Code == seckill.CodeOK || a.Code == seckill.CodeSoldOut {
					a.Remaining = max(0, a.Remaining) + s.others(parts, n)
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return seckill.Decision{}, err
	}
	for n := range parts {
		if _, decided := byPart[n]; !decided {
			d.Available += s.others(parts, -1) - s.others(parts, n)
		}
	}
	return d, nil
}

// refillTries bounds how often a part asks for units for the same
// buys (other parts' buyers may take what was moved) before it decides
// for good.
const refillTries = 4

// decidePart decides the buys buys[is] on part n, writing their answers
// into out: softly, and where the part lacks units, it brings units over
// from the other parts and decides again; when no other part has any
// left, it decides for good (a sold_out then is the sale's, and is
// remembered). It returns the part's units after the batch and the
// refusal every new buy would get.
func (s *Store) decidePart(ctx context.Context, parts []Part, n int, buys []seckill.Buy, is []int, out []seckill.Answer) (int64, seckill.Code, error) {
	mode := "soft"
	for try := 0; ; try++ {
		batch := make([]seckill.Buy, len(is))
		for j, i := range is {
			batch[j] = buys[i]
		}
		d, err := s.decide(ctx, parts[n], batch, mode)
		if err != nil {
			return 0, "", err
		}
		s.saw(parts[n], d.Available)
		var again []int
		var need int64
		for j, a := range d.Answers {
			out[is[j]] = a
			if a.Code == seckill.CodeBucketEmpty {
				again = append(again, is[j])
				need += batch[j].Qty
			}
		}
		if len(again) == 0 {
			return d.Available, d.Closed, nil
		}
		moved, err := s.refill(ctx, parts, n, need)
		if err != nil {
			return 0, "", err
		}
		if moved == 0 || try+1 >= refillTries {
			mode = ""
		}
		is = again
	}
}

// refill moves units into part dst from the other parts, fullest first:
// from the fullest at least need (if it has them) or half the difference
// between the two, then from the next ones until need is covered. It
// returns the units moved (0: every other part is empty).
func (s *Store) refill(ctx context.Context, parts []Part, dst int, need int64) (int64, error) {
	avails, err := s.available(ctx, parts)
	if err != nil {
		return 0, err
	}
	order := make([]int, 0, len(parts)-1)
	for i := range parts {
		if i != dst && avails[i] > 0 {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return avails[order[a]] > avails[order[b]] })
	var moved int64
	for k, src := range order {
		want := need - moved
		if k == 0 {
			want = max(want, (avails[src]-avails[dst])/2)
		}
		if want <= 0 {
			break
		}
		n, err := s.move(ctx, parts[src], parts[dst], want)
		if err != nil {
			return moved, err
		}
		moved += n
	}
	return moved, nil
}

// move takes up to units out of part from and delivers them to part to.
func (s *Store) move(ctx context.Context, from, to Part, units int64) (int64, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	src := s.partKeys(from)
	n, err := moveScript.Run(ctx, s.rdb, []string{src.Stock(), src.Moves()}, id, to.Tag, units).Int64()
	if err != nil {
		return 0, failed("move units from "+from.Tag, err)
	}
	if n == 0 {
		return 0, nil
	}
	s.mu.Lock()
	s.seen[from] -= n
	s.mu.Unlock()
	if err := s.deliver(ctx, from, to, id, n); err != nil {
		// The units wait in from's moves hash; Rebalance delivers them.
		return 0, err
	}
	return n, nil
}

// deliver puts the units of move id into part to (at most once) and then
// forgets the move in part from.
func (s *Store) deliver(ctx context.Context, from, to Part, id string, n int64) error {
	dst := s.partKeys(to)
	what := fmt.Sprintf("deliver move %s to %s", id, to.Tag)
	reply, err := acceptScript.Run(ctx, s.rdb, []string{dst.Stock(), dst.Arrived()}, id, n).Text()
	if err != nil {
		return failed(what, err)
	}
	code, f, err := decodeReply(reply, 2)
	if err != nil {
		return fmt.Errorf("inventory: %s: %w", what, err)
	}
	if code == seckill.CodeOK {
		s.saw(to, toInt(f[0]))
	}
	if err := s.rdb.HDel(ctx, s.partKeys(from).Moves(), id).Err(); err != nil {
		return failed(what, err)
	}
	return nil
}

// Rebalance evens out a sale's parts: it first delivers the moves a crash
// left in transit, then, while the fullest part has more than twice the
// units of the emptiest (and a few to spare), moves half the difference.
// It is safe to run anywhere, any time: a move never creates units.
func (s *Store) Rebalance(ctx context.Context, sale int64) error {
	parts, err := s.Parts(ctx, sale)
	if err != nil || len(parts) < 2 {
		return err
	}
	for _, from := range parts {
		moves, err := s.rdb.HGetAll(ctx, s.partKeys(from).Moves()).Result()
		if err != nil {
			return failed(fmt.Sprintf("moves of sale %d", sale), err)
		}
		for id, v := range moves {
			tag, units, err := decodeMove(v)
			if err != nil {
				return err
			}
			if err := s.deliver(ctx, from, Part{Sale: sale, Tag: tag}, id, units); err != nil {
				return err
			}
		}
	}
	avails, err := s.available(ctx, parts)
	if err != nil {
		return err
	}
	lo, hi := 0, 0
	for i, a := range avails {
		if a < avails[lo] {
			lo = i
		}
		if a > avails[hi] {
			hi = i
		}
	}
	if d := avails[hi] - avails[lo]; d > 2 && avails[hi] > 2*avails[lo] {
		_, err = s.move(ctx, parts[hi], parts[lo], d/2)
	}
	return err
}

// SaleLister lists the sales that may still have stock, outbox entries
// or orders on their way in Redis (the ledger implements it).
type SaleLister interface {
	SaleIDs(ctx context.Context, endedAfter time.Time) ([]int64, error)
}

// RunRebalancer rebalances every live sale with buckets every interval
// until ctx ends. Every server process runs one; moves are safe when they
// overlap.
func (s *Store) RunRebalancer(ctx context.Context, sales SaleLister, lookback, interval time.Duration) {
	failing := false
	wait.Every(ctx, interval, func() {
		ids, err := sales.SaleIDs(ctx, time.Now().Add(-lookback))
		for _, id := range ids {
			if parts, perr := s.Parts(ctx, id); perr == nil && len(parts) > 1 {
				err = errors.Join(err, s.Rebalance(ctx, id))
			}
		}
		if err != nil && !failing && ctx.Err() == nil {
			slog.Warn("inventory: rebalancing buckets failed", "err", err)
		}
		failing = err != nil
	})
}
