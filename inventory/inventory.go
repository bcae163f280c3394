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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
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
	// OrderID is the id the order gets if the request is accepted. A repeated
	// request returns the id stored the first time instead.
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
	// ExpireAt is when all the sale's keys go away; zero keeps them.
	ExpireAt time.Time
}

// Stock is the current state of a sale in Redis.
type Stock struct {
	Total, Available, Sold, Limit int64
	PriceCents                    int64
	Start, End                    time.Time
	Status                        string
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

// Store runs the stock scripts against one Redis.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
}

// New returns a Store using the given client and key builder.
func New(rdb redis.UniversalClient, keys Keys) *Store {
	return &Store{rdb: rdb, keys: keys}
}

// Keys returns the key builder of the store.
func (s *Store) Keys() Keys { return s.keys }

// Reserve decides a batch of buy requests for one sale in one Lua call and
// returns one Result per request, in order. An error means Redis did not
// answer; then nothing is known about the batch (a retry with the same
// request ids is safe).
func (s *Store) Reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, error) {
	res, _, err := s.reserve(ctx, sale, reqs)
	return res, err
}

// saleState is what a buy call saw of its sale after the batch: units
// available, and the refusal every new request would get ("ended",
// "paused", "not_started", "sale_not_found", or "").
type saleState struct {
	available int64
	closed    string
}

func (s *Store) reserve(ctx context.Context, sale int64, reqs []Request) ([]Result, saleState, error) {
	if len(reqs) == 0 {
		return nil, saleState{}, nil
	}
	args := make([]any, 0, 2+4*len(reqs))
	args = append(args, sale, len(reqs))
	for _, r := range reqs {
		args = append(args, r.UserID, r.Qty, r.RequestID, r.OrderID)
	}
	keys := []string{s.keys.Stock(sale), s.keys.Buyers(sale), s.keys.Reqs(sale), s.keys.Outbox(sale), s.keys.Orders(sale)}
	reply, err := lua.Buy.Run(ctx, s.rdb, keys, args...).Text()
	if err != nil {
		return nil, saleState{}, fmt.Errorf("inventory: buy sale %d: %w", sale, err)
	}
	lines := strings.Split(reply, "\n")
	if len(lines) != len(reqs)+1 {
		return nil, saleState{}, fmt.Errorf("inventory: buy sale %d: %d answers for %d requests", sale, len(lines)-1, len(reqs))
	}
	out := make([]Result, len(reqs))
	for i := range out {
		if out[i], err = parseAnswer(lines[i]); err != nil {
			return nil, saleState{}, fmt.Errorf("inventory: buy sale %d: %w", sale, err)
		}
	}
	avail, closed, _ := strings.Cut(lines[len(reqs)], "|")
	return out, saleState{available: toInt(avail), closed: closed}, nil
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
// HMGET for the whole batch (the sold-out fast path uses it).
func (s *Store) Lookup(ctx context.Context, sale int64, reqs []Request) (res []Result, found []bool, err error) {
	fields := make([]string, len(reqs))
	for i, r := range reqs {
		fields[i] = r.UserID + "|" + r.RequestID
	}
	vals, err := s.rdb.HMGet(ctx, s.keys.Reqs(sale), fields...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("inventory: lookup sale %d: %w", sale, err)
	}
	res = make([]Result, len(reqs))
	found = make([]bool, len(reqs))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if res[i], err = parseAnswer(str); err != nil {
			return nil, nil, fmt.Errorf("inventory: lookup sale %d: %w", sale, err)
		}
		found[i] = true
	}
	return res, found, nil
}

// Warm loads a sale into Redis, or updates its settings when it is there.
// With reset the counters are overwritten from s (a rebuild from the ledger);
// without, an existing sale keeps its counters. It returns available units.
func (s *Store) Warm(ctx context.Context, sale Sale, reset bool) (int64, error) {
	var exp int64
	if !sale.ExpireAt.IsZero() {
		exp = sale.ExpireAt.UnixMilli()
	}
	flag := "0"
	if reset {
		flag = "1"
	}
	avail, err := lua.Warm.Run(ctx, s.rdb, s.keys.All(sale.ID),
		sale.Total, sale.Sold, sale.Limit, sale.Start.UnixMilli(), sale.End.UnixMilli(),
		sale.Status, sale.PriceCents, exp, flag).Int64()
	if err != nil {
		return 0, fmt.Errorf("inventory: warm sale %d: %w", sale.ID, err)
	}
	s.announce(ctx, sale.ID)
	return avail, nil
}

// Restock adds qty units to a sale and returns the available units.
func (s *Store) Restock(ctx context.Context, sale, qty int64) (int64, error) {
	avail, err := lua.Restock.Run(ctx, s.rdb, []string{s.keys.Stock(sale)}, qty).Int64()
	if err != nil {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, err)
	}
	if avail < 0 {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, ErrSaleNotFound)
	}
	s.announce(ctx, sale)
	return avail, nil
}

// Release returns a cancelled order's units to its sale. It is idempotent:
// released is false when the order had been released before. A sale whose
// keys are gone (expired long after its end) has nothing to release.
func (s *Store) Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (avail int64, released bool, err error) {
	keys := []string{s.keys.Stock(sale), s.keys.Buyers(sale), s.keys.Released(sale)}
	avail, err = lua.Release.Run(ctx, s.rdb, keys, orderID, userID, qty).Int64()
	if err != nil {
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, err)
	}
	switch avail {
	case -1:
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, ErrSaleNotFound)
	case -2:
		return 0, false, nil
	}
	s.announce(ctx, sale)
	return avail, true, nil
}

// SetStatus pauses ("pause"), resumes ("resume") or ends ("end") a sale and
// returns its new merchant status.
func (s *Store) SetStatus(ctx context.Context, sale int64, action string) (string, error) {
	st, err := lua.Status.Run(ctx, s.rdb, []string{s.keys.Stock(sale)}, action).Text()
	if err != nil {
		switch {
		case strings.Contains(err.Error(), "sale_not_found"):
			err = ErrSaleNotFound
		case strings.Contains(err.Error(), "ended"):
			err = ErrEnded
		}
		return "", fmt.Errorf("inventory: %s sale %d: %w", action, sale, err)
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

var stockFields = []string{"total", "available", "sold", "limit", "price", "start", "end", "status"}

// Stock reads a sale's stock hash.
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

// Stocks reads the stock hashes of several sales in one round trip. Sales
// without one are missing from the map.
func (s *Store) Stocks(ctx context.Context, sales []int64) (map[int64]Stock, error) {
	cmds := make([]*redis.SliceCmd, len(sales))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range sales {
			cmds[i] = p.HMGet(ctx, s.keys.Stock(id), stockFields...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inventory: read stock: %w", err)
	}
	out := make(map[int64]Stock, len(sales))
	for i, c := range cmds {
		v := c.Val()
		if v[0] == nil {
			continue
		}
		out[sales[i]] = stockOf(v)
	}
	return out, nil
}

// Buyers returns the units each user holds in a sale.
func (s *Store) Buyers(ctx context.Context, sale int64) (map[string]int64, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Buyers(sale)).Result()
	if err != nil {
		return nil, fmt.Errorf("inventory: buyers of sale %d: %w", sale, err)
	}
	out := make(map[string]int64, len(m))
	for u, v := range m {
		out[u] = toInt(v)
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

// Accepted looks up an order accepted by buy.lua. ok is false when Redis
// holds no such order.
func (s *Store) Accepted(ctx context.Context, sale int64, orderID string) (o AcceptedOrder, ok bool, err error) {
	v, err := s.rdb.HGet(ctx, s.keys.Orders(sale), orderID).Result()
	if errors.Is(err, redis.Nil) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("inventory: order %s: %w", orderID, err)
	}
	o, err = parseAccepted(sale, orderID, v)
	return o, err == nil, err
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

// Snapshot is everything Redis holds about a sale's sold units, read in one
// MULTI/EXEC so the parts agree with each other.
type Snapshot struct {
	Present  bool
	Stock    Stock
	Buyers   map[string]int64
	Accepted map[string]AcceptedOrder
	Released map[string]bool
	// Outbox is the number of outbox entries (buy calls that accepted
	// orders) not yet confirmed by the broker.
	Outbox int64
	At     time.Time
}

// Snapshot reads a sale's state atomically. It is O(orders): for the
// reconciler, not for the request path.
func (s *Store) Snapshot(ctx context.Context, sale int64) (Snapshot, error) {
	var (
		stock    *redis.SliceCmd
		buyers   *redis.MapStringStringCmd
		accepted *redis.MapStringStringCmd
		released *redis.StringSliceCmd
		outbox   *redis.IntCmd
		now      *redis.TimeCmd
	)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		stock = p.HMGet(ctx, s.keys.Stock(sale), stockFields...)
		buyers = p.HGetAll(ctx, s.keys.Buyers(sale))
		accepted = p.HGetAll(ctx, s.keys.Orders(sale))
		released = p.SMembers(ctx, s.keys.Released(sale))
		outbox = p.XLen(ctx, s.keys.Outbox(sale))
		now = p.Time(ctx)
		return nil
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("inventory: snapshot of sale %d: %w", sale, err)
	}
	snap := Snapshot{
		Buyers: map[string]int64{}, Accepted: map[string]AcceptedOrder{}, Released: map[string]bool{},
		Outbox: outbox.Val(), At: now.Val(),
	}
	if v := stock.Val(); v[0] != nil {
		snap.Present = true
		snap.Stock = stockOf(v)
	}
	for u, n := range buyers.Val() {
		snap.Buyers[u] = toInt(n)
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
	return snap, nil
}

// Rebuild replaces a sale's per-order state in Redis with the ledger's:
// units per user, accepted orders (and their request ids, so retries still
// find them), released orders; then the stock hash itself, with its
// counters reset from sale. Callers make sure no buys run meanwhile (the
// sale is paused or its stock hash is gone).
func (s *Store) Rebuild(ctx context.Context, sale Sale, orders []AcceptedOrder, cancelled map[string]bool) error {
	keys := []string{s.keys.Buyers(sale.ID), s.keys.Reqs(sale.ID), s.keys.Orders(sale.ID), s.keys.Released(sale.ID)}
	if err := s.rdb.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("inventory: rebuild sale %d: %w", sale.ID, err)
	}
	const chunk = 1000
	for start := 0; start < len(orders); start += chunk {
		part := orders[start:min(start+chunk, len(orders))]
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range part {
				p.HSet(ctx, s.keys.Orders(sale.ID), o.OrderID, o.record())
				p.HSet(ctx, s.keys.Reqs(sale.ID), o.UserID+"|"+o.RequestID, fmt.Sprintf("ok|%s|%d|0", o.OrderID, o.Qty))
				if cancelled[o.OrderID] {
					p.SAdd(ctx, s.keys.Released(sale.ID), o.OrderID)
				} else {
					p.HIncrBy(ctx, s.keys.Buyers(sale.ID), o.UserID, o.Qty)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("inventory: rebuild sale %d: %w", sale.ID, err)
		}
	}
	_, err := s.Warm(ctx, sale, true)
	return err
}

func stockOf(v []any) Stock {
	return Stock{
		Total: toInt(v[0]), Available: toInt(v[1]), Sold: toInt(v[2]), Limit: toInt(v[3]),
		PriceCents: toInt(v[4]),
		Start:      time.UnixMilli(toInt(v[5])), End: time.UnixMilli(toInt(v[6])),
		Status: fmt.Sprint(v[7]),
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
