// Package inventory keeps each sale's live state in Redis: its stock,
// decided by one atomic Lua call per batch of buys (see package lua), the
// records of what was accepted until the ledger has it, and the sale's
// short-lived records (outcome counts, capped users, proof-of-work
// challenges). It is the gate of the system: what it accepts is an order,
// what it refuses never touches the ledger. In front of the store sit the
// sold-out fast path and the coalescing batcher, each a Reserver over the
// next.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/internal/tracing"
)

// Reserver decides a batch of buys for one sale: the store itself, or a
// layer in front of it (FastPath, Batcher) built over the next one.
type Reserver interface {
	Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error)
}

// Config is what a Store needs to know besides its Redis.
type Config struct {
	// Prefix starts every key (one deployment, one prefix).
	Prefix string
	// Keep is how long a sale's keys live after its end (the payment
	// window and the sale's retention); 0 keeps them.
	Keep time.Duration
	// WaitReplicas replicas must have each buy call (WAIT) before it is
	// answered, within WaitTimeout; 0: answer at once.
	WaitReplicas int
	WaitTimeout  time.Duration
	// OnWaitTimeout, if set, is told of each WAIT that timed out.
	OnWaitTimeout func()
	// Wallets, for sales with instant checkout on one Redis, is where the
	// buyers' wallets live (funds.Store): buy.lua charges them in the call
	// that decides the stock. FeeBps is the platform's share of a charge.
	Wallets Wallets
	FeeBps  int64
}

// Wallets names the keys of a buyer's wallet group, as package funds
// keeps them, for buy.lua to charge an instant-checkout order in the call
// that accepts it (funds.Store).
type Wallets interface {
	// ChargeKeys are the keys of the charge of order, by user's wallet:
	// its group's balances hash, the charge's movement record and the
	// group's funds outbox.
	ChargeKeys(user, order string) (group int, keys []string)
	// Retention is how long a movement's record lives.
	Retention() time.Duration
	// Charged tells the funds relay that group's outbox has a new entry.
	Charged(group int)
}

// Store runs the stock scripts against Redis (one server, a Sentinel set
// or a cluster).
type Store struct {
	rdb      rdb.Client
	keys     rdb.Keys
	replicas rdb.Replicas
	cfg      Config

	// persist, when set, keeps what parts' outboxes hold before a buy
	// on them is answered (SetPersist).
	persist Persister

	mu      sync.Mutex
	parts   map[int64][]Part // each sale's parts, fixed at its creation
	instant map[int64]bool   // the sales with instant checkout, fixed at their creation
	seen    map[Part]int64   // units each part of a bucketed sale had when last seen here
}

// New returns a Store on rdb.
func New(c rdb.Client, cfg Config) *Store {
	return &Store{
		rdb: c, keys: rdb.NewKeys(cfg.Prefix), cfg: cfg, parts: map[int64][]Part{}, instant: map[int64]bool{}, seen: map[Part]int64{},
		replicas: rdb.Replicas{N: cfg.WaitReplicas, Timeout: cfg.WaitTimeout, OnTimeout: cfg.OnWaitTimeout},
	}
}

// Persister keeps what the sales' outboxes hold and, for an instant
// checkout's charges, the outboxes of the wallet groups charged: the
// embedded system's durability fence, in place of replicas
// (worker.WriteThrough).
type Persister interface {
	// Parts returns once what the parts' and the groups' outboxes hold is
	// kept; ids are the orders and charges the caller is about to answer,
	// refused if the ledger refused them.
	Parts(ctx context.Context, parts []Part, groups []int, ids []string) error
	// Reset says part p's outbox was deleted: it begins again.
	Reset(p Part)
}

// SetPersist has p keep what the outboxes hold: Keeping waits for it
// before buys are answered, Durable before the relay publishes, Rebuild
// resets it. Set it before the store is used.
func (s *Store) SetPersist(p Persister) { s.persist = p }

// Keeping returns next, whose decisions are answered only once what they
// appended is kept (SetPersist), or next itself when nothing keeps. Put
// in front of the batcher, a batch's orders are written while the next
// batch is decided, and the writes of many batches share a transaction.
func (s *Store) Keeping(next Reserver) Reserver {
	if s.persist == nil {
		return next
	}
	return keeping{next: next, s: s}
}

type keeping struct {
	next Reserver
	s    *Store
}

// Reserve decides buys through next, then, when it accepted any, keeps
// every part of the sale (a bucketed sale's buy may take a unit of
// another part than its user's) and the wallet groups of the buyers of an
// instant checkout: found answers too, for a first attempt's decision
// may have been made and not kept. Refusals keep nothing, and wait for
// nothing: a sold-out crowd never reaches the ledger.
func (k keeping) Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error) {
	d, err := k.next.Reserve(ctx, sale, buys)
	if err != nil {
		return d, err
	}
	var groups []int
	var ids []string
	for i, a := range d.Answers {
		if a.Code != seckill.CodeOK {
			continue
		}
		ids = append(ids, a.OrderID)
		if a.ChargeID != "" && k.s.cfg.Wallets != nil { // charged in the buy
			g, _ := k.s.cfg.Wallets.ChargeKeys(buys[i].UserID, "")
			groups, ids = append(groups, g), append(ids, a.ChargeID)
		}
	}
	if len(ids) == 0 {
		return d, nil
	}
	parts, err := k.s.Parts(ctx, sale)
	if err != nil {
		return seckill.Decision{}, err
	}
	if err := k.s.persist.Parts(ctx, parts, groups, ids); err != nil {
		return seckill.Decision{}, fmt.Errorf("inventory: keep the buys of sale %d: %w: %w", sale, seckill.ErrUnavailable, err)
	}
	return d, nil
}

// partKeys names the keys of part p.
func (s *Store) partKeys(p Part) rdb.PartKeys { return s.keys.Part(p.Tag) }

// Keys returns the key builder of the store.
func (s *Store) Keys() rdb.Keys { return s.keys }

// failed wraps an error of Redis doing op, marked seckill.ErrUnavailable
// when trying again may get past it (a connection refused or lost, a
// timeout, a failover in progress).
func failed(op string, err error) error {
	if rdb.Transient(err) {
		return fmt.Errorf("inventory: %s: %w: %w", op, seckill.ErrUnavailable, err)
	}
	return fmt.Errorf("inventory: %s: %w", op, err)
}

// Reserve decides a batch of buys for one sale: an answer per buy, in
// order, and the sale's units and state after. Each buy is decided by one
// Lua call on its user's part of the sale (all of them for a sale without
// buckets). An error means Redis did not answer (or, with replicas
// awaited, did not confirm); then nothing is known about the batch (a
// retry with the same request ids is safe).
func (s *Store) Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error) {
	if len(buys) == 0 {
		return seckill.Decision{}, nil
	}
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		d := seckill.Decision{Answers: make([]seckill.Answer, len(buys)), Closed: seckill.CodeSaleNotFound}
		for i, b := range buys {
			d.Answers[i] = seckill.Answer{Code: seckill.CodeSaleNotFound, Qty: b.Qty}
		}
		return d, nil
	}
	if err != nil {
		return seckill.Decision{}, err
	}
	if len(parts) == 1 {
		return s.decide(ctx, parts[0], buys, "")
	}
	return s.reserveBuckets(ctx, sale, parts, buys)
}

// decide runs buy.lua on one part for buys (mode "" or "soft"). Traced,
// the call is one span for the batch, linked to each buy's request (the
// child of the one when there is one), and its context goes with the
// outbox entry to the relay.
func (s *Store) decide(ctx context.Context, p Part, buys []seckill.Buy, mode string) (seckill.Decision, error) {
	pay := s.pay(ctx, p.Sale)
	k := 4
	if pay == payHold {
		k = 6
	}
	keys := []string{}
	k0 := s.partKeys(p)
	keys = append(keys, k0.Stock(), k0.Buyers(), k0.Reqs(), k0.Outbox(), k0.Orders())
	args := make([]any, 0, 7+k*len(buys))
	args = append(args, p.Sale, len(buys), mode, pay, s.cfg.FeeBps, 0)
	var groups []int // by buy, the wallet group its charge goes to
	if pay == payCharge {
		args[5] = int64(s.cfg.Wallets.Retention() / time.Second)
		groups = make([]int, len(buys))
	}
	for i, b := range buys {
		if b.OrderID == "" {
			b.OrderID = seckill.NewOrderID(p.Sale)
		}
		args = append(args, b.UserID, b.Qty, b.RequestID, b.OrderID)
		switch pay {
		case payHold:
			var amount, deadline int64
			if b.Hold != nil {
				amount, deadline = b.Hold.Amount, b.Hold.Deadline.UnixMilli()
			}
			args = append(args, amount, deadline)
		case payCharge:
			g, wk := s.cfg.Wallets.ChargeKeys(b.UserID, b.OrderID)
			groups[i] = g
			keys = append(keys, wk...)
		}
	}
	if tracing.Enabled() {
		traces := make([]string, len(buys))
		for i, b := range buys {
			traces[i] = b.Trace
		}
		var span trace.Span
		ctx, span = tracing.StartFrom(ctx, "redis buy.lua", trace.SpanKindClient, traces,
			attribute.Int64("seckill.sale_id", p.Sale), attribute.String("seckill.part", p.Tag), attribute.Int("seckill.batch", len(buys)))
		defer span.End()
		args = append(args, tracing.Traceparent(ctx))
	}
	reply, err := s.runBuy(ctx, keys, args)
	if err != nil {
		return seckill.Decision{}, failed(fmt.Sprintf("buy sale %d (part %s)", p.Sale, p.Tag), err)
	}
	d, err := decodeBatch(reply, len(buys))
	if err != nil {
		return seckill.Decision{}, fmt.Errorf("inventory: buy sale %d: %w", p.Sale, err)
	}
	if pay != "" {
		charged(d.Answers)
	}
	for i, a := range d.Answers {
		if groups != nil && a.Code == seckill.CodeOK {
			s.cfg.Wallets.Charged(groups[i]) // at worst a notice for a retry's old charge
		}
	}
	return d, nil
}

// How buy.lua is asked to decide the payment of a sale with instant
// checkout (its ARGV[4]).
const (
	payCharge = "charge" // in the call itself: one Redis
	payHold   = "hold"   // against holds made before: a Cluster
)

// pay is how a sale's buys pay: "" (a payment window after the buy),
// payCharge or payHold.
func (s *Store) pay(ctx context.Context, sale int64) string {
	switch {
	case !s.Instant(ctx, sale):
		return ""
	case s.Cluster():
		return payHold
	case s.cfg.Wallets == nil:
		return payHold // no wallets to charge here: refused unless held
	}
	return payCharge
}

// Cluster reports whether the store runs on a Redis Cluster, where a
// sale's keys and a wallet's lie on different slots.
func (s *Store) Cluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// paidAs is how an instant-checkout sale's orders are paid here (their
// Event.Pay): as pay decides their buys.
func (s *Store) paidAs() string {
	if s.Cluster() || s.cfg.Wallets == nil {
		return seckill.PayHeld
	}
	return seckill.PayCharged
}

// charged gives the accepted answers of an instant-checkout sale the id
// of the charge that paid their orders.
func charged(as []seckill.Answer) {
	for i := range as {
		if as[i].Code == seckill.CodeOK {
			as[i].ChargeID = seckill.ChargeID(as[i].OrderID)
		}
	}
}

// runBuy runs buy.lua on the master that holds the keys and, with
// replicas awaited, answers once they have its decision (rdb.Replicas).
func (s *Store) runBuy(ctx context.Context, keys []string, args []any) (string, error) {
	reply, err := s.replicas.Run(ctx, s.rdb, buyScript, keys, args...)
	if err != nil {
		return "", err
	}
	return reply.Text()
}

// Durable returns once the replicas awaited (Config.WaitReplicas) have
// every write made to part p's keys so far, and what its outbox holds is
// kept (SetPersist), or fails (seckill.ErrUnavailable).
// The relay calls it before it publishes what it read: an outbox entry of
// a buy call whose WAIT timed out may vanish in a failover, and its
// request be decided again, so it must not reach the ledger first.
// Without replicas awaited it returns at once.
func (s *Store) Durable(ctx context.Context, p Part) error {
	if err := s.replicas.Fence(ctx, s.rdb, s.keys.Part(p.Tag).Fence()); err != nil {
		return failed("fence of part "+p.Tag, err)
	}
	if s.persist != nil {
		if err := s.persist.Parts(ctx, []Part{p}, nil, nil); err != nil {
			return fmt.Errorf("inventory: keep the outbox of part %s: %w: %w", p.Tag, seckill.ErrUnavailable, err)
		}
	}
	return nil
}

// Lookup returns the stored answers of buys seen before, without deciding
// anything: found[i] reports whether buys[i] had one. It costs one HMGET
// per part the batch's users are in (the sold-out fast path uses it).
func (s *Store) Lookup(ctx context.Context, sale int64, buys []seckill.Buy) (answers []seckill.Answer, found []bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return nil, nil, err
	}
	cmds := make([]*redis.SliceCmd, len(buys))
	idx := map[int][]int{} // part → indexes of its buys
	for i, b := range buys {
		n := partIndex(len(parts), b.UserID)
		idx[n] = append(idx[n], i)
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n, is := range idx {
			fields := make([]string, len(is))
			for j, i := range is {
				fields[j] = reqField(buys[i].UserID, buys[i].RequestID)
			}
			cmds[is[0]] = p.HMGet(ctx, s.partKeys(parts[n]).Reqs(), fields...)
		}
		return nil
	})
	if err != nil {
		return nil, nil, failed(fmt.Sprintf("lookup sale %d", sale), err)
	}
	answers = make([]seckill.Answer, len(buys))
	found = make([]bool, len(buys))
	for _, is := range idx {
		for j, v := range cmds[is[0]].Val() {
			str, ok := v.(string)
			if !ok {
				continue
			}
			i := is[j]
			if answers[i], err = decodeAnswer(str); err != nil {
				return nil, nil, fmt.Errorf("inventory: lookup sale %d: %w", sale, err)
			}
			found[i] = true
		}
	}
	if s.Instant(ctx, sale) {
		charged(answers)
	}
	return answers, found, nil
}

// expireAt is when a sale's keys go away.
func (s *Store) expireAt(sale seckill.Sale) time.Time {
	if s.cfg.Keep <= 0 {
		return time.Time{}
	}
	return sale.EndsAt.Add(s.cfg.Keep)
}

// Warm loads a sale into Redis, or updates its settings when it is there
// (its counters stay). A new sale gets its parts (sale.Buckets of them, on
// different masters) with its units split between them. It returns the
// available units.
func (s *Store) Warm(ctx context.Context, sale seckill.Sale) (int64, error) {
	parts, err := s.Parts(ctx, sale.ID)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		parts, err = s.place(ctx, sale.ID, max(1, sale.Buckets), sale.InstantCheckout)
	}
	if err != nil {
		return 0, err
	}
	totals := split(sale.Total, len(parts))
	var avail int64
	for i, p := range parts {
		a, err := s.warmPart(ctx, p, parts, sale, totals[i], 0, false)
		if err != nil {
			return 0, err
		}
		avail += a
	}
	s.announce(ctx, sale.ID)
	return avail, nil
}

// warmPart runs warm.lua on one part: total and sold are its counters if
// it is new or reset is set.
func (s *Store) warmPart(ctx context.Context, p Part, parts []Part, sale seckill.Sale, total, sold int64, reset bool) (int64, error) {
	w := warmArgs{
		total: total, sold: sold, limit: sale.PerUserLimit, start: sale.StartsAt, end: sale.EndsAt, status: sale.Status,
		price: sale.PriceCents, expireAt: s.expireAt(sale), reset: reset, parts: len(parts),
		ticket: sale.RequireTicket, powDifficulty: sale.PowDifficulty, verifiedOnly: sale.VerifiedOnly,
		room: sale.WaitingRoom, queueOpen: sale.QueueOpensAt, rate: sale.AdmitPerSecond, merchant: sale.MerchantID,
		instant: sale.InstantCheckout,
	}
	if p == parts[0] {
		w.tags = tagList(parts)
	}
	avail, err := warmScript.Run(ctx, s.rdb, s.partKeys(p).All(), w.args()...).Int64()
	if err != nil {
		return 0, failed(fmt.Sprintf("warm sale %d (part %s)", sale.ID, p.Tag), err)
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
	reply, err := restockScript.Run(ctx, s.rdb, []string{s.partKeys(parts[least]).Stock()}, qty).Text()
	if err != nil {
		return 0, failed(fmt.Sprintf("restock sale %d", sale), err)
	}
	code, f, err := decodeReply(reply, 1)
	if err != nil {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, err)
	}
	if code != seckill.CodeOK {
		return 0, fmt.Errorf("inventory: restock sale %d: %w", sale, code.Err())
	}
	avail := toInt(f[0])
	if len(parts) > 1 {
		s.saw(parts[least], avail)
	}
	s.announce(ctx, sale)
	return sum(avails) - avails[least] + avail, nil
}

// Release returns a cancelled order's units to its sale (to the part of
// its user). It is idempotent: released is false when the order had been
// released before. A sale whose keys are gone (expired long after its
// end) has nothing to release: seckill.ErrSaleNotFound.
func (s *Store) Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (avail int64, released bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, err)
	}
	part := partFor(parts, userID)
	k := s.partKeys(part)
	reply, err := releaseScript.Run(ctx, s.rdb, []string{k.Stock(), k.Buyers(), k.Released()}, orderID, userID, qty).Text()
	if err != nil {
		return 0, false, failed("release order "+orderID, err)
	}
	code, f, err := decodeReply(reply, 2)
	if err != nil {
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, err)
	}
	if code != seckill.CodeOK {
		return 0, false, fmt.Errorf("inventory: release order %s: %w", orderID, code.Err())
	}
	avail, released = toInt(f[0]), f[1] == "1"
	if !released {
		return avail, false, nil
	}
	if len(parts) > 1 {
		s.saw(part, avail)
	}
	s.announce(ctx, sale)
	return avail, true, nil
}

// SetStatus pauses, resumes or ends a sale, every part of it, and returns
// its new merchant status: seckill.ErrEnded for pausing or resuming an
// ended sale, seckill.ErrSaleNotFound for a sale Redis does not hold.
func (s *Store) SetStatus(ctx context.Context, sale int64, action seckill.Action) (seckill.Status, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return "", fmt.Errorf("inventory: %s sale %d: %w", action, sale, err)
	}
	var st seckill.Status
	for _, p := range parts {
		reply, err := statusScript.Run(ctx, s.rdb, []string{s.partKeys(p).Stock()}, string(action)).Text()
		if err != nil {
			return "", failed(fmt.Sprintf("%s sale %d", action, sale), err)
		}
		code, f, err := decodeReply(reply, 1)
		if err != nil {
			return "", fmt.Errorf("inventory: %s sale %d: %w", action, sale, err)
		}
		if code != seckill.CodeOK {
			return "", fmt.Errorf("inventory: %s sale %d: %w", action, sale, code.Err())
		}
		st = seckill.Status(f[0])
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

// Stock reads a sale's stock (its parts added up), or
// seckill.ErrSaleNotFound.
func (s *Store) Stock(ctx context.Context, sale int64) (seckill.Stock, error) {
	m, err := s.Stocks(ctx, []int64{sale})
	if err != nil {
		return seckill.Stock{}, err
	}
	st, ok := m[sale]
	if !ok {
		return seckill.Stock{}, fmt.Errorf("inventory: stock of sale %d: %w", sale, seckill.ErrSaleNotFound)
	}
	return st, nil
}

// Stocks reads the stock of several sales, each the sum of its parts, in
// one round trip (per master). Sales without stock are missing from the
// map.
func (s *Store) Stocks(ctx context.Context, sales []int64) (map[int64]seckill.Stock, error) {
	type read struct {
		sale  int64
		parts []Part
		cmds  []*redis.SliceCmd
	}
	reads := make([]read, 0, len(sales))
	for _, id := range sales {
		parts, err := s.Parts(ctx, id)
		if errors.Is(err, seckill.ErrSaleNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		reads = append(reads, read{sale: id, parts: parts, cmds: make([]*redis.SliceCmd, len(parts))})
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range reads {
			for i, part := range r.parts {
				r.cmds[i] = p.HMGet(ctx, s.partKeys(part).Stock(), stockFields...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, failed("read stock", err)
	}
	out := make(map[int64]seckill.Stock, len(reads))
	for _, r := range reads {
		var parts []seckill.Stock
		for _, c := range r.cmds {
			if st, ok := decodeStock(c.Val()); ok {
				parts = append(parts, st)
			}
		}
		if len(parts) > 0 {
			out[r.sale] = addUp(parts)
		}
	}
	return out, nil
}

// addUp is a sale's stock from its parts' (the first present one's
// settings, every part's counters).
func addUp(parts []seckill.Stock) seckill.Stock {
	sum := parts[0]
	for _, st := range parts[1:] {
		sum.Total += st.Total
		sum.Available += st.Available
		sum.Sold += st.Sold
	}
	return sum
}

// Buyers returns the units each user holds in a sale.
func (s *Store) Buyers(ctx context.Context, sale int64) (map[string]int64, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, p := range parts {
		m, err := s.rdb.HGetAll(ctx, s.partKeys(p).Buyers()).Result()
		if err != nil {
			return nil, failed(fmt.Sprintf("buyers of sale %d", sale), err)
		}
		for u, v := range m {
			out[u] += toInt(v)
		}
	}
	return out, nil
}

// Bought is the units user holds in a sale (what its per-user cap
// counts): one read of the part user is pinned to; ErrSaleNotFound for a
// sale Redis does not hold.
func (s *Store) Bought(ctx context.Context, sale int64, user string) (int64, error) {
	parts, err := s.Parts(ctx, sale)
	if err != nil {
		return 0, err
	}
	n, err := s.rdb.HGet(ctx, s.partKeys(partFor(parts, user)).Buyers(), user).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, failed(fmt.Sprintf("units of %s in sale %d", user, sale), err)
	}
	return n, nil
}

// Charging looks up an order of user accepted by buy.lua, as its event,
// with what paying it needs besides: whose sale it is (merchant -1 in
// keys warmed before Redis kept it); one round trip to user's part of the
// sale. ok is false when Redis holds no such order of that user. An
// instant-checkout sale's order comes with its Pay set: paid in its buy.
func (s *Store) Charging(ctx context.Context, sale int64, orderID, user string) (e seckill.Event, merchant int64, ok bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		return e, 0, false, nil
	}
	if err != nil {
		return e, 0, false, err
	}
	k := s.partKeys(partFor(parts, user))
	var order *redis.StringCmd
	var owner *redis.SliceCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		order = p.HGet(ctx, k.Orders(), orderID)
		owner = p.HMGet(ctx, k.Stock(), "merchant", "instant")
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return e, 0, false, nil
	}
	if err != nil {
		return e, 0, false, failed("order "+orderID, err)
	}
	e, err = decodeOrder(sale, orderID, order.Val())
	if err != nil || e.UserID != user {
		return e, 0, false, err
	}
	if toInt(owner.Val()[1]) == 1 {
		e.Pay = s.paidAs() // paid in its buy: nothing left to charge
	}
	return e, merchantOf(owner.Val()[0]), true, nil
}

// Snapshot is everything Redis holds about a sale's sold units, each part
// read in one MULTI/EXEC so its pieces agree with each other.
type Snapshot struct {
	Present bool
	Stock   seckill.Stock
	Buyers  map[string]int64
	// Accepted are the orders buy.lua accepted, by id.
	Accepted map[string]seckill.Event
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
	snap := Snapshot{Buyers: map[string]int64{}, Accepted: map[string]seckill.Event{}, Released: map[string]bool{}}
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		return snap, nil
	}
	if err != nil {
		return snap, err
	}
	what := fmt.Sprintf("snapshot of sale %d", sale)
	var stocks []seckill.Stock
	moves := map[string]int64{}  // move id → units, leaving some part
	arrived := map[string]bool{} // move ids some part received
	for _, p := range parts {
		k := s.partKeys(p)
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
			return Snapshot{}, failed(what, err)
		}
		now, err := s.rdb.Time(ctx).Result()
		if err != nil {
			return Snapshot{}, failed(what, err)
		}
		if now.After(snap.At) {
			snap.At = now
		}
		if st, ok := decodeStock(stock.Val()); ok {
			stocks = append(stocks, st)
		}
		for u, n := range buyers.Val() {
			snap.Buyers[u] += toInt(n)
		}
		for id, rec := range accepted.Val() {
			e, err := decodeOrder(sale, id, rec)
			if err != nil {
				return Snapshot{}, err
			}
			snap.Accepted[id] = e
		}
		for _, id := range released.Val() {
			snap.Released[id] = true
		}
		snap.Outbox += outbox.Val()
		for id, v := range out.Val() {
			if _, n, err := decodeMove(v); err == nil {
				moves[id] = n
			}
		}
		for _, id := range in.Val() {
			arrived[id] = true
		}
	}
	if len(stocks) > 0 {
		snap.Present, snap.Stock = true, addUp(stocks)
	}
	if snap.Stock.Instant {
		for id, e := range snap.Accepted {
			e.Pay = s.paidAs() // paid in its buy
			snap.Accepted[id] = e
		}
	}
	for id, n := range moves {
		if !arrived[id] {
			snap.InTransit += n
		}
	}
	return snap, nil
}

// Rebuild replaces a sale's state in Redis with the ledger's: its counters
// (sold units as the ledger counts them), units per user, accepted orders
// (and their request ids, so retries still find them) and released
// orders; each part's sold units are its users', the units left are split
// between the parts. The parts stay where they are (other processes know
// them); a sale Redis lost is placed again. Callers make sure no buys are
// decided meanwhile (the sale is paused, or its stock is gone): each stock
// hash stays, marked paused, while the other keys are rebuilt, so a buy in
// between is refused 'paused', not 'sale_not_found', until the counters
// are written last.
func (s *Store) Rebuild(ctx context.Context, sale seckill.Sale, sold int64, orders []seckill.Event, cancelled map[string]bool) error {
	parts, err := s.Parts(ctx, sale.ID)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		parts, err = s.place(ctx, sale.ID, max(1, sale.Buckets), sale.InstantCheckout)
	}
	if err != nil {
		return err
	}
	what := fmt.Sprintf("rebuild sale %d", sale.ID)
	for _, p := range parts {
		keys := s.partKeys(p).All() // stock hash first
		_, err := s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pl.HSet(ctx, keys[0], "status", string(seckill.StatusPaused))
			pl.Del(ctx, keys[1:]...)
			return nil
		})
		if err != nil {
			return failed(what, err)
		}
		if s.persist != nil {
			s.persist.Reset(p) // its outbox begins again
		}
	}
	partSold := make([]int64, len(parts))
	const chunk = 1000
	for start := 0; start < len(orders); start += chunk {
		batch := orders[start:min(start+chunk, len(orders))]
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range batch {
				n := partIndex(len(parts), o.UserID)
				k := s.partKeys(parts[n])
				p.HSet(ctx, k.Orders(), o.OrderID, encodeOrder(o))
				p.HSet(ctx, k.Reqs(), reqField(o.UserID, o.RequestID),
					encodeAnswer(seckill.Answer{Code: seckill.CodeOK, OrderID: o.OrderID, Qty: o.Qty}))
				if cancelled[o.OrderID] {
					p.SAdd(ctx, k.Released(), o.OrderID)
				} else {
					p.HIncrBy(ctx, k.Buyers(), o.UserID, o.Qty)
					partSold[n] += o.Qty
				}
			}
			return nil
		})
		if err != nil {
			return failed(what, err)
		}
	}
	left := split(sale.Total-sold, len(parts))
	for i, p := range parts {
		if _, err := s.warmPart(ctx, p, parts, sale, partSold[i]+left[i], partSold[i], true); err != nil {
			return err
		}
	}
	s.announce(ctx, sale.ID)
	return nil
}

// Settle finds how the stock decided an instant-checkout buy whose wallet
// hold outlived its deadline, and makes sure it never decides it after:
// the request's stored answer, or a stored refusal hold_expired put in
// its place now (settle.lua), so a stock step arriving late answers that.
// ok is false when Redis holds no keys of the sale (nothing can be
// decided on them).
func (s *Store) Settle(ctx context.Context, sale int64, user, request string, qty int64) (a seckill.Answer, ok bool, err error) {
	parts, err := s.Parts(ctx, sale)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	k := s.partKeys(partFor(parts, user))
	res, err := s.replicas.Run(ctx, s.rdb, settleScript, []string{k.Stock(), k.Reqs()}, reqField(user, request), qty)
	var reply string
	if err == nil {
		reply, err = res.Text()
	}
	if err != nil {
		return a, false, failed(fmt.Sprintf("settle request %s of sale %d", request, sale), err)
	}
	if reply == "" {
		return a, false, nil
	}
	a, err = decodeAnswer(reply)
	if err != nil {
		return a, false, fmt.Errorf("inventory: settle request %s of sale %d: %w", request, sale, err)
	}
	return a, true, nil
}
