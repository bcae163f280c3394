// Package inventory keeps each sale's stock in Redis and decides buys with
// one atomic Lua call per batch of requests (see package lua). It is the gate
// of the system: what it accepts is an order, what it refuses never touches
// the ledger.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/orders"
)

// Refusals of a buy, and other domain errors of the stock.
var (
	ErrSoldOut       = errors.New("inventory: sold out")
	ErrLimitExceeded = errors.New("inventory: per-user limit exceeded")
	ErrNotStarted    = errors.New("inventory: sale not started")
	ErrEnded         = errors.New("inventory: sale ended")
	ErrPaused        = errors.New("inventory: sale paused")
	ErrSaleNotFound  = errors.New("inventory: sale not found")
)

// codeErrs maps the codes returned by buy.lua to the sentinel errors.
var codeErrs = map[string]error{
	"ok":             nil,
	"sold_out":       ErrSoldOut,
	"limit_exceeded": ErrLimitExceeded,
	"not_started":    ErrNotStarted,
	"ended":          ErrEnded,
	"paused":         ErrPaused,
	"sale_not_found": ErrSaleNotFound,
	"bucket_empty":   errBucketEmpty,
}

// Merchant-set states of a sale, as stored in the stock hash.
const (
	StatusActive = "active"
	StatusPaused = "paused"
	StatusEnded  = "ended"
)

// Request is one buy request of a batch.
type Request struct {
	UserID    string
	Qty       int64
	RequestID string
	// OrderID is the id the order gets if the request is accepted; empty,
	// one is made (orders.NewID) only when buy.lua decides the request, not
	// for answers the fast path gives. A repeated request returns the id
	// stored the first time instead.
	OrderID string
}

// Result is the decision on one Request.
type Result struct {
	// Err is nil for an accepted request, else one of the sentinel errors.
	Err       error
	OrderID   string
	Qty       int64
	Remaining int64
}

// Sale is what the stock hash holds about a sale besides its counters.
type Sale struct {
	ID         int64
	Total      int64
	Sold       int64
	Limit      int64
	PriceCents int64
	Start, End time.Time
	Status     string
	// Buckets is how many parts the sale's stock is split into (1: one).
	Buckets int
	// ExpireAt is when all the sale's keys go away; zero keeps them.
	ExpireAt time.Time
	// RequireTicket and PowDifficulty are the sale's bot defence, kept
	// beside the stock so the buy path reads them without MySQL.
	RequireTicket bool
	PowDifficulty int
}

// Stock is the current state of a sale in Redis.
type Stock struct {
	Total, Available, Sold, Limit int64
	PriceCents                    int64
	Start, End                    time.Time
	Status                        string
	RequireTicket                 bool
	PowDifficulty                 int
}

// Status is the sale's state as shoppers see it at time now:
// scheduled, active, paused, sold_out or ended.
func (st Stock) StatusAt(now time.Time) string {
	switch {
	case st.Status == StatusEnded || !now.Before(st.End):
		return "ended"
	case st.Status == StatusPaused:
		return "paused"
	case now.Before(st.Start):
		return "scheduled"
	case st.Available <= 0:
		return "sold_out"
	}
	return "active"
}

// Store runs the stock scripts against Redis (one server, a Sentinel set
// or a cluster).
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	// waitReplicas and waitTimeout make every buy call wait for replicas
	// (WAIT) before it is answered; 0 replicas: no wait.
	waitReplicas int
	waitTimeout  time.Duration

	mu    sync.Mutex
	parts map[int64][]Part // each sale's parts, fixed at its creation
	seen  map[Part]int64   // units each part of a bucketed sale had when last seen here
}

// New returns a Store using the given client and key builder.
func New(rdb redis.UniversalClient, keys Keys) *Store {
	return &Store{rdb: rdb, keys: keys, parts: map[int64][]Part{}, seen: map[Part]int64{}}
}

// WithDurability makes every buy call wait, pipelined on its connection,
// until replicas replicas have its writes (WAIT), for at most timeout; a
// call that times out fails with ErrNotDurable. It returns s.
func (s *Store) WithDurability(replicas int, timeout time.Duration) *Store {
	s.waitReplicas, s.waitTimeout = replicas, timeout
	return s
}

// Keys returns the key builder of the store.
func (s *Store) Keys() Keys { return s.keys }

// ErrNotDurable means a buy call was decided by the master but its
// replicas did not confirm having it in time: if the master failed now,
// the decision could be lost. Nothing is answered for it; a retry with the
// same request ids returns the decision if it survived, or decides again.
var ErrNotDurable = errors.New("inventory: decision not confirmed by the replicas")

// Reserve decides a batch of buy requests for one sale and returns one
// Result per request, in order. Each request is decided by one Lua call on
// its user's part of the sale (all of them for a sale without buckets).
// An error means Redis did not answer (or, with replicas awaited, did not
// confirm); then nothing is known about the batch (a retry with the same
// request ids is safe).
func (s *Store) Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error) {
	res, _, err := s.reserve(ctx, sale, reqs)
	return res, err
}

// saleState is what a buy call saw of its sale after the batch: units
// available (in every part), and the refusal every new request would get
// ("ended", "paused", "not_started", "sale_not_found", or "").
type saleState struct {
	available int64
	closed    string
}

func (s *Store) reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, saleState, error) {
	if len(reqs) == 0 {
		return nil, saleState{}, nil
	}
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, ErrSaleNotFound) {
		out := make([]Result, len(reqs))
		for i, r := range reqs {
			out[i] = Result{Err: ErrSaleNotFound, Qty: r.Qty}
		}
		return out, saleState{closed: "sale_not_found"}, nil
	}
	if err != nil {
		return nil, saleState{}, err
	}
	if len(parts) == 1 {
		return s.decide(ctx, parts[0], reqs, "")
	}
	return s.reserveBuckets(ctx, sale, parts, reqs)
}

// decide runs buy.lua on one part for reqs (mode "" or "soft").
func (s *Store) decide(ctx context.Context, p Part, reqs []Request, mode string) ([]Result, saleState, error) {
	args := make([]any, 0, 3+4*len(reqs))
	args = append(args, p.Sale, len(reqs), mode)
	for _, r := range reqs {
		if r.OrderID == "" {
			r.OrderID = orders.NewID(p.Sale)
		}
		args = append(args, r.UserID, r.Qty, r.RequestID, r.OrderID)
	}
	k := s.keys.Of(p)
	reply, err := s.runBuy(ctx, []string{k.Stock(), k.Buyers(), k.Reqs(), k.Outbox(), k.Orders()}, args)
	if err != nil {
		return nil, saleState{}, fmt.Errorf("inventory: buy sale %d (part %s): %w", p.Sale, p.Tag, err)
	}
	lines := strings.Split(reply, "\n")
	if len(lines) != len(reqs)+1 {
		return nil, saleState{}, fmt.Errorf("inventory: buy sale %d: %d answers for %d requests", p.Sale, len(lines)-1, len(reqs))
	}
	out := make([]Result, len(reqs))
	for i := range out {
		if out[i], err = parseAnswer(lines[i]); err != nil {
			return nil, saleState{}, fmt.Errorf("inventory: buy sale %d: %w", p.Sale, err)
		}
	}
	avail, closed, _ := strings.Cut(lines[len(reqs)], "|")
	return out, saleState{available: toInt(avail), closed: closed}, nil
}

// runBuy runs buy.lua, and with replicas awaited, WAIT right after it on
// the same connection (pipelined: one round trip), on the master that
// holds the keys.
func (s *Store) runBuy(ctx context.Context, keys []string, args []any) (string, error) {
	if s.waitReplicas <= 0 {
		return lua.Buy.Run(ctx, s.rdb, keys, args...).Text()
	}
	var reply string
	err := s.onMaster(ctx, keys[0], func(node *redis.Client) error {
		var buy, wait *redis.Cmd
		pipe := func() error {
			_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
				buy = lua.Buy.EvalSha(ctx, p, keys, args...)
				wait = p.Do(ctx, "WAIT", s.waitReplicas, s.waitTimeout.Milliseconds())
				return nil
			})
			return err
		}
		err := pipe()
		if redis.HasErrorPrefix(buy.Err(), "NOSCRIPT") {
			// A pipeline cannot fall back to EVAL: load the script and try
			// again (nothing ran).
			if err := lua.Buy.Load(ctx, node).Err(); err != nil {
				return err
			}
			err = pipe()
		}
		if err := buy.Err(); err != nil {
			return err
		}
		if err != nil {
			return err
		}
		if n, _ := wait.Int64(); n < int64(s.waitReplicas) {
			return fmt.Errorf("%w: %d of %d replicas within %s", ErrNotDurable, n, s.waitReplicas, s.waitTimeout)
		}
		reply, err = buy.Text()
		return err
	})
	return reply, err
}

// onMaster runs fn with the client of the master that holds key. A
// cluster's master may have changed (a failover): when the node answers
// that the slot moved, or is down, the slot map is read again and fn
// tried again (the node ran nothing), a few times.
func (s *Store) onMaster(ctx context.Context, key string, fn func(node *redis.Client) error) error {
	for attempt := 0; ; attempt++ {
		node, err := masterFor(ctx, s.rdb, key)
		if err == nil {
			err = fn(node)
		}
		cc, cluster := s.rdb.(*redis.ClusterClient)
		if !cluster || !Redirected(err) || attempt >= 10 {
			return err
		}
		cc.ReloadState(ctx)
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Redirected reports whether a Redis error says the command went to a node
// that does not serve its slot now (a failover or resharding in progress):
// nothing ran, and the command can go again once the client knows better.
func Redirected(err error) bool {
	for _, prefix := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// Durable returns once the replicas awaited (WithDurability) have every
// write made to part p's keys so far, or fails with ErrNotDurable. The
// relay calls it before it publishes what it read: an outbox entry of a
// buy call whose WAIT timed out may vanish in a failover, and its request
// be decided again, so it must not reach the ledger first. A write of its
// own on the part's master, then WAIT on that connection: replication is
// one ordered stream, so once the replicas have the fence they have all
// that came before it. Without replicas awaited it returns at once.
func (s *Store) Durable(ctx context.Context, p Part) error {
	if s.waitReplicas <= 0 {
		return nil
	}
	fence := s.keys.Of(p).Fence()
	return s.onMaster(ctx, fence, func(node *redis.Client) error {
		var wait *redis.Cmd
		_, err := node.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pl.Incr(ctx, fence)
			pl.Expire(ctx, fence, time.Hour)
			wait = pl.Do(ctx, "WAIT", s.waitReplicas, s.waitTimeout.Milliseconds())
			return nil
		})
		if err != nil {
			return fmt.Errorf("inventory: fence of part %s: %w", p.Tag, err)
		}
		if n, _ := wait.Int64(); n < int64(s.waitReplicas) {
			return fmt.Errorf("%w: part %s: %d of %d replicas within %s", ErrNotDurable, p.Tag, n, s.waitReplicas, s.waitTimeout)
		}
		return nil
	})
}

// parseAnswer reads an answer as buy.lua returns and stores it:
// code|order_id|qty|remaining.
func parseAnswer(s string) (Result, error) {
	parts := strings.Split(s, "|")
	if len(parts) != 4 {
		return Result{}, fmt.Errorf("bad answer %q", s)
	}
	e, ok := codeErrs[parts[0]]
	if !ok {
		return Result{}, fmt.Errorf("unknown code %q", parts[0])
	}
	return Result{Err: e, OrderID: parts[1], Qty: toInt(parts[2]), Remaining: toInt(parts[3])}, nil
}

// Lookup returns the stored answers of requests seen before, without
// deciding anything: found[i] reports whether reqs[i] had one. It costs one
// HMGET per part the batch's users are in (the sold-out fast path uses it).
func (s *Store) Lookup(ctx context.Context, sale int64, reqs []Request) (res []Result, found []bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return nil, nil, err
	}
	cmds := make([]*redis.SliceCmd, len(reqs))
	idx := map[int][]int{} // part → indexes of its requests
	for i, r := range reqs {
		n := partIndex(len(parts), r.UserID)
		idx[n] = append(idx[n], i)
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n, is := range idx {
			fields := make([]string, len(is))
			for j, i := range is {
				fields[j] = reqs[i].UserID + "|" + reqs[i].RequestID
			}
			cmds[is[0]] = p.HMGet(ctx, s.keys.Of(parts[n]).Reqs(), fields...)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("inventory: lookup sale %d: %w", sale, err)
	}
	res = make([]Result, len(reqs))
	found = make([]bool, len(reqs))
	for _, is := range idx {
		for j, v := range cmds[is[0]].Val() {
			str, ok := v.(string)
			if !ok {
				continue
			}
			i := is[j]
			if res[i], err = parseAnswer(str); err != nil {
				return nil, nil, fmt.Errorf("inventory: lookup sale %d: %w", sale, err)
			}
			found[i] = true
		}
	}
	return res, found, nil
}

// Warm loads a sale into Redis, or updates its settings when it is there.
// A new sale gets its parts (sale.Buckets of them, on different masters)
// with its units split between them. With reset the counters are
// overwritten from sale (a rebuild from the ledger, see Rebuild); without,
// an existing sale keeps its counters. It returns the available units.
func (s *Store) Warm(ctx context.Context, sale Sale, reset bool) (int64, error) {
	parts, err := s.Parts(ctx, sale.ID)
	if errors.Is(err, ErrSaleNotFound) {
		parts, err = s.place(ctx, sale.ID, max(1, sale.Buckets))
	}
	if err != nil {
		return 0, err
	}
	totals := split(sale.Total-sale.Sold, len(parts))
	var avail int64
	for i, p := range parts {
		total, sold := totals[i], int64(0)
		if i == 0 {
			total, sold = totals[0]+sale.Sold, sale.Sold
		}
		a, err := s.warmPart(ctx, p, parts, sale, total, sold, reset)
		if err != nil {
			return 0, err
		}
		avail += a
	}
	s.announce(ctx, sale.ID)
	return avail, nil
}

// warmPart runs warm.lua on one part.
func (s *Store) warmPart(ctx context.Context, p Part, parts []Part, sale Sale, total, sold int64, reset bool) (int64, error) {
	var exp int64
	if !sale.ExpireAt.IsZero() {
		exp = sale.ExpireAt.UnixMilli()
	}
	flag, ticket := "0", "0"
	if reset {
		flag = "1"
	}
	if sale.RequireTicket {
		ticket = "1"
	}
	tags := ""
	if p == parts[0] {
		tags = tagList(parts)
	}
	avail, err := lua.Warm.Run(ctx, s.rdb, s.keys.Of(p).All(),
		total, sold, sale.Limit, sale.Start.UnixMilli(), sale.End.UnixMilli(),
		sale.Status, sale.PriceCents, exp, flag, len(parts), tags, ticket, sale.PowDifficulty).Int64()
	if err != nil {
		return 0, fmt.Errorf("inventory: warm sale %d (part %s): %w", sale.ID, p.Tag, err)
	}
	return avail, nil
}

// split divides n units between k parts as evenly as it can.
func split(n int64, k int) []int64 {
	out := make([]int64, k)
	for i := range out {
		out[i] = n / int64(k)
		if int64(i) < n%int64(k) {
			out[i]++
		}
	}
	return out
}

// Restock adds qty units to a sale (to its part with the fewest available
// units; the rebalancer spreads them) and returns the available units.
func (s *Store) Restock(ctx context.Context, sale, qty int64) (int64, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, err)
	}
	avails, err := s.available(ctx, parts)
	if err != nil {
		return 0, err
	}
	least := 0
	for i, a := range avails {
		if a < avails[least] {
			least = i
		}
	}
	avail, err := lua.Restock.Run(ctx, s.rdb, []string{s.keys.Of(parts[least]).Stock()}, qty).Int64()
	if err != nil {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, err)
	}
	if avail < 0 {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, ErrSaleNotFound)
	}
	if len(parts) > 1 {
		s.saw(parts[least], avail)
	}
	s.announce(ctx, sale)
	return sum(avails) - avails[least] + avail, nil
}

// Release returns a cancelled order's units to its sale (to the part of
// its user). It is idempotent: released is false when the order had been
// released before. A sale whose keys are gone (expired long after its end)
// has nothing to release.
func (s *Store) Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (avail int64, released bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, err)
	}
	part := partFor(parts, userID)
	k := s.keys.Of(part)
	avail, err = lua.Release.Run(ctx, s.rdb, []string{k.Stock(), k.Buyers(), k.Released()}, orderID, userID, qty).Int64()
	if err != nil {
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, err)
	}
	switch avail {
	case -1:
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, ErrSaleNotFound)
	case -2:
		return 0, false, nil
	}
	if len(parts) > 1 {
		s.saw(part, avail)
	}
	s.announce(ctx, sale)
	return avail, true, nil
}

// SetStatus pauses ("pause"), resumes ("resume") or ends ("end") a sale,
// every part of it, and returns its new merchant status.
func (s *Store) SetStatus(ctx context.Context, sale int64, action string) (string, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return "", fmt.Errorf("inventory: %s sale %d: %w", action, sale, err)
	}
	var st string
	for _, p := range parts {
		st, err = lua.Status.Run(ctx, s.rdb, []string{s.keys.Of(p).Stock()}, action).Text()
		if err != nil {
			switch {
			case strings.Contains(err.Error(), "sale_not_found"):
				err = ErrSaleNotFound
			case strings.Contains(err.Error(), "ended"):
				err = ErrEnded
			}
			return "", fmt.Errorf("inventory: %s sale %d: %w", action, sale, err)
		}
	}
	s.announce(ctx, sale)
	return st, nil
}

// announce tells every server process that a sale's stock or status
// changed, so a sold-out (or ended) mark they hold is dropped at once. A
// lost message costs at most the marks' lifetime (FastPath.recheck).
func (s *Store) announce(ctx context.Context, sale int64) {
	if err := s.rdb.Publish(ctx, s.keys.StockChanged(), strconv.FormatInt(sale, 10)).Err(); err != nil {
		slog.Warn("inventory: announcing a stock change failed", "sale", sale, "err", err)
	}
}

var stockFields = []string{"total", "available", "sold", "limit", "price", "start", "end", "status", "ticket", "pow"}

// Stock reads a sale's stock (its parts added up).
func (s *Store) Stock(ctx context.Context, sale int64) (Stock, error) {
	m, err := s.Stocks(ctx, []int64{sale})
	if err != nil {
		return Stock{}, err
	}
	st, ok := m[sale]
	if !ok {
		return Stock{}, fmt.Errorf("inventory: stock of sale %d: %w", sale, ErrSaleNotFound)
	}
	return st, nil
}

// Stocks reads the stock of several sales, each the sum of its parts, in
// one round trip (per master). Sales without stock are missing from the
// map.
func (s *Store) Stocks(ctx context.Context, sales []int64) (map[int64]Stock, error) {
	type read struct {
		sale int64
		cmds []*redis.SliceCmd
	}
	reads := make([]read, 0, len(sales))
	for _, id := range sales {
		parts, err := s.Parts(ctx, id)
		if errors.Is(err, ErrSaleNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		reads = append(reads, read{sale: id, cmds: make([]*redis.SliceCmd, len(parts))})
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range reads {
			parts, _ := s.Parts(ctx, r.sale) // cached above
			for i, part := range parts {
				r.cmds[i] = p.HMGet(ctx, s.keys.Of(part).Stock(), stockFields...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inventory: read stock: %w", err)
	}
	out := make(map[int64]Stock, len(reads))
	for _, r := range reads {
		var sum Stock
		present := false
		for i, c := range r.cmds {
			v := c.Val()
			if v[0] == nil {
				continue
			}
			st := stockOf(v)
			if !present {
				sum = st
				present = true
				continue
			}
			if i > 0 {
				sum.Total += st.Total
				sum.Available += st.Available
				sum.Sold += st.Sold
			}
		}
		if present {
			out[r.sale] = sum
		}
	}
	return out, nil
}

// Buyers returns the units each user holds in a sale.
func (s *Store) Buyers(ctx context.Context, sale int64) (map[string]int64, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, p := range parts {
		m, err := s.rdb.HGetAll(ctx, s.keys.Of(p).Buyers()).Result()
		if err != nil {
			return nil, fmt.Errorf("inventory: buyers of sale %d: %w", sale, err)
		}
		for u, v := range m {
			out[u] += toInt(v)
		}
	}
	return out, nil
}

// AcceptedOrder is an order as buy.lua recorded it, before or after the
// worker persisted it.
type AcceptedOrder struct {
	OrderID   string
	SaleID    int64
	UserID    string
	Qty       int64
	RequestID string
	At        time.Time
	// PriceCents is the unit price the order was accepted at; -1 if the
	// record predates prices in records.
	PriceCents int64
}

// Accepted looks up an order of user accepted by buy.lua. ok is false
// when Redis holds no such order.
func (s *Store) Accepted(ctx context.Context, sale int64, orderID, user string) (o AcceptedOrder, ok bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, ErrSaleNotFound) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	v, err := s.rdb.HGet(ctx, s.keys.Of(partFor(parts, user)).Orders(), orderID).Result()
	if errors.Is(err, redis.Nil) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("inventory: order %s: %w", orderID, err)
	}
	o, err = parseAccepted(sale, orderID, v)
	return o, err == nil && o.UserID == user, err
}

// toInt reads an integer reply that Redis may give as a number or a string.
func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// Snapshot is everything Redis holds about a sale's sold units, each part
// read in one MULTI/EXEC so its pieces agree with each other.
type Snapshot struct {
	Present  bool
	Stock    Stock
	Buyers   map[string]int64
	Accepted map[string]AcceptedOrder
	Released map[string]bool
	// Outbox is the number of outbox entries (buy calls that accepted
	// orders) not yet confirmed by the broker.
	Outbox int64
	// InTransit are units the rebalancer took out of one bucket and has not
	// yet delivered to another: part of the sale's total, in no part's.
	InTransit int64
	At        time.Time
}

// Snapshot reads a sale's state, part by part. It is O(orders): for the
// reconciler, not for the request path.
func (s *Store) Snapshot(ctx context.Context, sale int64) (Snapshot, error) {
	snap := Snapshot{Buyers: map[string]int64{}, Accepted: map[string]AcceptedOrder{}, Released: map[string]bool{}}
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, ErrSaleNotFound) {
		return snap, nil
	}
	if err != nil {
		return snap, err
	}
	moves := map[string]int64{}  // move id → units, leaving some part
	arrived := map[string]bool{} // move ids some part received
	for i, p := range parts {
		k := s.keys.Of(p)
		var (
			stock    *redis.SliceCmd
			buyers   *redis.MapStringStringCmd
			accepted *redis.MapStringStringCmd
			released *redis.StringSliceCmd
			outbox   *redis.IntCmd
			out      *redis.MapStringStringCmd
			in       *redis.StringSliceCmd
		)
		_, err := s.rdb.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			stock = pl.HMGet(ctx, k.Stock(), stockFields...)
			buyers = pl.HGetAll(ctx, k.Buyers())
			accepted = pl.HGetAll(ctx, k.Orders())
			released = pl.SMembers(ctx, k.Released())
			outbox = pl.XLen(ctx, k.Outbox())
			out = pl.HGetAll(ctx, k.Moves())
			in = pl.SMembers(ctx, k.Arrived())
			return nil
		})
		if err != nil {
			return Snapshot{}, fmt.Errorf("inventory: snapshot of sale %d: %w", sale, err)
		}
		now, err := s.rdb.Time(ctx).Result()
		if err != nil {
			return Snapshot{}, fmt.Errorf("inventory: snapshot of sale %d: %w", sale, err)
		}
		if now.After(snap.At) {
			snap.At = now
		}
		if v := stock.Val(); v[0] != nil {
			st := stockOf(v)
			if i == 0 {
				snap.Present, snap.Stock = true, st
			} else {
				snap.Stock.Total += st.Total
				snap.Stock.Available += st.Available
				snap.Stock.Sold += st.Sold
			}
		}
		for u, n := range buyers.Val() {
			snap.Buyers[u] += toInt(n)
		}
		for id, rec := range accepted.Val() {
			o, err := parseAccepted(sale, id, rec)
			if err != nil {
				return Snapshot{}, err
			}
			snap.Accepted[id] = o
		}
		for _, id := range released.Val() {
			snap.Released[id] = true
		}
		snap.Outbox += outbox.Val()
		for id, v := range out.Val() {
			_, n, _ := strings.Cut(v, "|")
			moves[id] = toInt(n)
		}
		for _, id := range in.Val() {
			arrived[id] = true
		}
	}
	for id, n := range moves {
		if !arrived[id] {
			snap.InTransit += n
		}
	}
	return snap, nil
}

// Rebuild replaces a sale's state in Redis with the ledger's: units per
// user, accepted orders (and their request ids, so retries still find
// them), released orders, and each part's counters (each part's sold
// units are its users'; the units left are split between the parts). The
// parts stay where they are (other processes know them); a sale Redis lost
// is placed again. Callers make sure no buys are decided meanwhile (the
// sale is paused, or its stock is gone): each stock hash stays, marked
// paused, while the other keys are rebuilt, so a buy in between is refused
// 'paused', not 'sale_not_found', until the counters are written last.
func (s *Store) Rebuild(ctx context.Context, sale Sale, orders []AcceptedOrder, cancelled map[string]bool) error {
	parts, err := s.Parts(ctx, sale.ID)
	if errors.Is(err, ErrSaleNotFound) {
		parts, err = s.place(ctx, sale.ID, max(1, sale.Buckets))
	}
	if err != nil {
		return err
	}
	for _, p := range parts {
		keys := s.keys.Of(p).All() // stock hash first
		_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pl.HSet(ctx, keys[0], "status", StatusPaused)
			pl.Del(ctx, keys[1:]...)
			return nil
		})
		if err != nil {
			return fmt.Errorf("inventory: rebuild sale %d: %w", sale.ID, err)
		}
	}
	sold := make([]int64, len(parts))
	const chunk = 1000
	for start := 0; start < len(orders); start += chunk {
		part := orders[start:min(start+chunk, len(orders))]
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range part {
				n := partIndex(len(parts), o.UserID)
				k := s.keys.Of(parts[n])
				p.HSet(ctx, k.Orders(), o.OrderID, o.record())
				p.HSet(ctx, k.Reqs(), o.UserID+"|"+o.RequestID, fmt.Sprintf("ok|%s|%d|0", o.OrderID, o.Qty))
				if cancelled[o.OrderID] {
					p.SAdd(ctx, k.Released(), o.OrderID)
				} else {
					p.HIncrBy(ctx, k.Buyers(), o.UserID, o.Qty)
					sold[n] += o.Qty
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("inventory: rebuild sale %d: %w", sale.ID, err)
		}
	}
	left := split(sale.Total-sale.Sold, len(parts))
	for i, p := range parts {
		if _, err := s.warmPart(ctx, p, parts, sale, sold[i]+left[i], sold[i], true); err != nil {
			return err
		}
	}
	s.announce(ctx, sale.ID)
	return nil
}

func stockOf(v []any) Stock {
	return Stock{
		Total: toInt(v[0]), Available: toInt(v[1]), Sold: toInt(v[2]), Limit: toInt(v[3]),
		PriceCents: toInt(v[4]),
		Start:      time.UnixMilli(toInt(v[5])), End: time.UnixMilli(toInt(v[6])),
		Status:        fmt.Sprint(v[7]),
		RequireTicket: v[8] == "1", PowDifficulty: int(toInt(v[9])),
	}
}

func parseAccepted(sale int64, orderID, rec string) (AcceptedOrder, error) {
	parts := strings.Split(rec, "|")
	if len(parts) != 4 && len(parts) != 5 { // records written before prices were kept have 4
		return AcceptedOrder{}, fmt.Errorf("inventory: order %s: bad record %q", orderID, rec)
	}
	o := AcceptedOrder{
		OrderID: orderID, SaleID: sale, UserID: parts[0], Qty: toInt(parts[1]),
		RequestID: parts[2], At: time.UnixMilli(toInt(parts[3])), PriceCents: -1,
	}
	if len(parts) == 5 {
		o.PriceCents = toInt(parts[4])
	}
	return o, nil
}

// record is how buy.lua stores an accepted order in the orders hash.
func (o AcceptedOrder) record() string {
	return fmt.Sprintf("%s|%d|%s|%d|%d", o.UserID, o.Qty, o.RequestID, o.At.UnixMilli(), o.PriceCents)
}
