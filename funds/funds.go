// Package funds keeps the balances of the funds ledger's accounts in
// Redis, where money is decided under a flash crowd the way stock is: a
// movement of money (seckill.Movement) is one atomic Lua call (funds.lua)
// on the one account whose floor or ceiling it checks, its side: the
// call checks the balance, moves it, records the movement's id (a retry
// answers the first decision; a retry with another sum is refused) and
// appends the movement to its group's outbox, from which the funds relay
// carries it to the ledger. The movement's other accounts follow once the
// ledger holds it (follow.lua), exactly once each.
//
// Accounts live in hashes of groups (funds_groups of them; an account's
// group is a hash of its name), each group's keys under one hash tag, so
// each call touches one Cluster slot. It is the one owner of these
// records in Redis.
package funds

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/lua"
)

// Config is what a Store needs to know besides its Redis.
type Config struct {
	// Prefix starts every key (one deployment, one prefix).
	Prefix string
	// Groups is how many hashes the accounts are spread over; fixed once
	// money is held (an account's group is a hash of its name modulo it).
	Groups int
	// WalletMax is the most a wallet may hold after a credit.
	WalletMax int64
	// Retention is how long a movement's record is kept: how long a retry
	// of it answers the first decision, and a cancelled one stays
	// cancelled.
	Retention time.Duration
	// Replicas must have each decision before it is answered (the
	// durability fence), as for buys.
	Replicas rdb.Replicas
}

// DefaultRetention keeps movement records a week.
const DefaultRetention = 7 * 24 * time.Hour

// Store decides movements of money in Redis.
type Store struct {
	rdb      rdb.Client
	keys     rdb.Keys
	cfg      Config
	appended chan int
	// persist, when set, keeps what a group's outbox holds before a
	// movement of it is answered (SetPersist).
	persist func(ctx context.Context, g int, id string) error
}

// Keep returns once what the outbox of side's group holds is kept
// (SetPersist; at once without): for a caller whose ledger transaction,
// in which a movement was kept, rolled back.
func (s *Store) Keep(ctx context.Context, side seckill.FundsAccount) error {
	if s.persist == nil {
		return nil
	}
	if err := s.persist(ctx, s.Group(side), ""); err != nil {
		return fmt.Errorf("funds: keep the outbox of %s: %w: %w", side, seckill.ErrUnavailable, err)
	}
	return nil
}

// SetPersist has every movement made or found, and Durable, wait for fn
// to keep what the group's outbox holds (id: the movement about to be
// answered, which fn refuses if the ledger did; "" for none): the
// embedded system's durability fence, in place of replicas
// (worker.WriteThrough). Set it before the store is used.
func (s *Store) SetPersist(fn func(ctx context.Context, g int, id string) error) { s.persist = fn }

// New returns a Store on c.
func New(c rdb.Client, cfg Config) *Store {
	if cfg.Groups < 1 {
		cfg.Groups = 1
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	return &Store{rdb: c, keys: rdb.NewKeys(cfg.Prefix), cfg: cfg, appended: make(chan int, 1024)}
}

// The scripts, ready to Run.
var (
	fundsScript  = redis.NewScript(lua.Funds)
	followScript = redis.NewScript(lua.Follow)
)

// failed wraps an error of Redis doing op, marked seckill.ErrUnavailable
// when trying again may get past it.
func failed(op string, err error) error {
	if rdb.Transient(err) {
		return fmt.Errorf("funds: %s: %w: %w", op, seckill.ErrUnavailable, err)
	}
	return fmt.Errorf("funds: %s: %w", op, err)
}

// Group is the group an account's balance lives in: the one place that
// maps an account to its keys.
func (s *Store) Group(a seckill.FundsAccount) int {
	h := fnv.New32a()
	h.Write([]byte(a))
	return int(h.Sum32() % uint32(s.cfg.Groups))
}

// Groups is how many groups there are.
func (s *Store) Groups() int { return s.cfg.Groups }

// Appended tells, without blocking the callers, the groups this process
// appended an entry to: the relay reads them at once rather than at its
// next sweep. A full channel drops a notice; the sweep finds the entry.
func (s *Store) Appended() <-chan int { return s.appended }

// ChargeKeys are the keys buy.lua needs to charge order to user's wallet
// in the call that accepts it (a sale with instant checkout on one
// Redis): the wallet's group, its balances hash, the charge's movement
// record and the group's outbox, as funds.lua keeps them.
func (s *Store) ChargeKeys(user, order string) (int, []string) {
	g := s.Group(seckill.WalletOf(user))
	k := s.keys.Funds(g)
	return g, []string{k.Balances(), k.Movement(seckill.ChargeID(order)), k.Outbox()}
}

// Charged tells the relay that group g's outbox has a new entry made
// outside this package (buy.lua's charges).
func (s *Store) Charged(g int) { s.notify(g) }

func (s *Store) notify(g int) {
	select {
	case s.appended <- g:
	default:
	}
}

// ceiling is the most account a may hold after a credit (0: no bound).
func (s *Store) ceiling(a seckill.FundsAccount) int64 {
	if a.Kind() == seckill.KindWallet {
		return s.cfg.WalletMax
	}
	return 0
}

// Move decides movement m on its side: the side's balance after, and
// whether this call made it (false: a retry of one made before, answered
// the same). Refusals change nothing and keep nothing, so the same id may
// be tried again later: seckill.ErrInsufficientFunds (the side would go
// below 0), seckill.ErrBalanceLimit (a wallet would hold more than
// WalletMax), seckill.ErrOrderCancelled (m was cancelled before it was
// made: it never will be). An id that made a movement of another sum is
// refused as invalid.
func (s *Store) Move(ctx context.Context, m seckill.Movement) (int64, bool, error) {
	return s.MoveKeeping(ctx, m, 0)
}

// MoveKeeping is Move with the side's floor raised to keep: refused with
// seckill.ErrInsufficientFunds when it would leave the side (a floored
// account) less than keep. A payout keeps what a void may still take
// back.
func (s *Store) MoveKeeping(ctx context.Context, m seckill.Movement, keep int64) (int64, bool, error) {
	if err := m.Validate(); err != nil {
		return 0, false, err
	}
	event, err := EncodeMovement(m)
	if err != nil {
		return 0, false, err
	}
	return s.run(ctx, "move", m.Side, m.ID, m.Delta(m.Side), m.Sum(), event, "", false, keep)
}

// errMadeMeanwhile is funds.lua's answer to a cancel whose target was
// made since the caller read its record: read it again.
var errMadeMeanwhile = errors.New("funds: the movement to cancel was made meanwhile")

// Cancel undoes the movement of id target, decided on side, at: if it was
// made, its exact reversal (seckill.Reverse) is made, once; if it was
// never made, it is recorded that it never will be (a later Move of it
// answers seckill.ErrOrderCancelled) and nothing moves. made says whether
// this call made the reversal. A cancel racing a late movement resolves
// in one atomic step to made-and-reversed or never-made, never both and
// never neither (dtm's barrier for a compensation that comes first).
func (s *Store) Cancel(ctx context.Context, side seckill.FundsAccount, target string, at time.Time) (bool, error) {
	k := s.keys.Funds(s.Group(side))
	for range 3 {
		rec, err := s.rdb.Get(ctx, k.Movement(target)).Result()
		if err != nil && err != redis.Nil {
			return false, failed("read "+target, err)
		}
		r := seckill.Reverse(seckill.Movement{ID: target, Side: side}, at)
		seen, event := false, ""
		if _, made, ok := recordEvent(rec); ok {
			m, err := DecodeMovement(made)
			if err != nil {
				return false, err
			}
			r, seen = seckill.Reverse(m, at), true
			if event, err = EncodeMovement(r); err != nil {
				return false, err
			}
		}
		_, did, err := s.run(ctx, "cancel", side, r.ID, r.Delta(side), r.Sum(), event, target, seen, 0)
		if errors.Is(err, errMadeMeanwhile) {
			continue
		}
		return did, err
	}
	return false, fmt.Errorf("funds: cancel %s: %w: it keeps changing", target, seckill.ErrUnavailable)
}

// Close makes sure movement target, decided on side, is never made from
// now on (a barrier: a later Move of it answers seckill.ErrOrderCancelled)
// unless it was made already: then made is true and nothing changes. In
// one atomic step, so a Move racing it either came first (made) or is
// refused: what the payment timeout asks before it cancels an order.
func (s *Store) Close(ctx context.Context, side seckill.FundsAccount, target string, at time.Time) (made bool, err error) {
	r := seckill.Reverse(seckill.Movement{ID: target, Side: side}, at)
	_, _, err = s.run(ctx, "cancel", side, r.ID, r.Delta(side), r.Sum(), "", target, false, 0)
	switch {
	case errors.Is(err, errMadeMeanwhile):
		return true, nil
	case seckill.CodeOf(err) == seckill.CodeInvalid:
		return false, nil // reversed before (Cancel): it stands undone, and can no longer be made
	}
	return false, err
}

// Made reports whether movement id, decided on side, was made (a retry of
// it would answer made before): a payment whose status the ledger does
// not show yet.
func (s *Store) Made(ctx context.Context, side seckill.FundsAccount, id string) (bool, error) {
	rec, err := s.rdb.Get(ctx, s.keys.Funds(s.Group(side)).Movement(id)).Result()
	if err == redis.Nil {
		return false, nil
	}
	if err != nil {
		return false, failed("read "+id, err)
	}
	_, _, made := recordEvent(rec)
	return made, nil
}

// recordEvent reads a movement record "ok|sum|balance|event".
func recordEvent(rec string) (sum, event string, ok bool) {
	f := strings.SplitN(rec, "|", 4)
	if len(f) != 4 || f[0] != "ok" {
		return "", "", false
	}
	return f[1], f[3], true
}

// run runs funds.lua.
func (s *Store) run(ctx context.Context, mode string, side seckill.FundsAccount, id string, delta, sum int64, event, target string,
	seen bool, keep int64) (int64, bool, error) {
	g := s.Group(side)
	k := s.keys.Funds(g)
	keys := []string{k.Balances(), k.Movement(id), k.Outbox()}
	if mode == "cancel" {
		keys = append(keys, k.Movement(target))
	}
	floor := ""
	if side.Floored() {
		floor = strconv.FormatInt(keep, 10)
	}
	reply, err := s.cfg.Replicas.Run(ctx, s.rdb, fundsScript, keys, mode, string(side), delta, floor,
		s.ceiling(side), sum, event, int64(s.cfg.Retention/time.Second), flag(seen))
	if err != nil {
		return 0, false, failed(fmt.Sprintf("%s %s", mode, id), err)
	}
	text, err := reply.Text()
	if err != nil {
		return 0, false, failed(fmt.Sprintf("%s %s", mode, id), err)
	}
	code, balance, made, err := decodeReply(text)
	if err != nil {
		return 0, false, err
	}
	if made {
		s.notify(g)
	}
	switch code {
	case seckill.CodeOK:
		if s.persist != nil {
			// Found as well as made: a first attempt's movement may have
			// been made and not yet kept.
			if err := s.persist(ctx, g, id); err != nil {
				return 0, false, fmt.Errorf("funds: %s %s: %w: %w", mode, id, seckill.ErrUnavailable, err)
			}
		}
		return balance, made, nil
	case seckill.CodeInvalid:
		return balance, false, seckill.Errorf(seckill.CodeInvalid, "This request id was used for another amount.")
	case seckill.CodeUnavailable:
		return balance, false, errMadeMeanwhile
	}
	return balance, false, fmt.Errorf("funds: %s %s: %w", mode, id, code.Err())
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Follow applies the movements' shares to their accounts other than
// their sides (the ledger holds the movements), exactly once per movement
// and account however often it is asked: one follow.lua call per group of
// accounts (and per followChunk shares), the groups at once.
func (s *Store) Follow(ctx context.Context, ms ...seckill.Movement) error {
	type shares struct {
		keys []string
		args []any
	}
	ttl := int64(s.cfg.Retention / time.Second)
	var calls []*shares
	open := map[int]*shares{}
	for _, m := range ms {
		for _, a := range m.Accounts()[1:] {
			g := s.Group(a)
			c := open[g]
			if c == nil || len(c.keys)-1 >= followChunk {
				k := s.keys.Funds(g)
				c = &shares{keys: []string{k.Balances()}, args: []any{ttl}}
				open[g], calls = c, append(calls, c)
			}
			c.keys = append(c.keys, s.keys.Funds(g).Followed(m.ID, string(a)))
			c.args = append(c.args, string(a), m.Delta(a))
		}
	}
	var eg errgroup.Group
	eg.SetLimit(followCalls)
	for _, c := range calls {
		eg.Go(func() error {
			// Through the durability fence, as every decision: the consumer
			// acknowledges its movements once followed, so a follow a
			// failover took back would never be applied again.
			if _, err := s.cfg.Replicas.Run(ctx, s.rdb, followScript, c.keys, c.args...); err != nil {
				return failed(fmt.Sprintf("follow %d shares", len(c.keys)-1), err)
			}
			return nil
		})
	}
	return eg.Wait()
}

const (
	// followChunk bounds the shares one follow.lua call applies.
	followChunk = 256
	// followCalls is how many follow.lua calls run at once.
	followCalls = 8
)

// Balance reads an account's balance (0 for one that never held money).
func (s *Store) Balance(ctx context.Context, a seckill.FundsAccount) (int64, error) {
	v, err := s.rdb.HGet(ctx, s.keys.Funds(s.Group(a)).Balances(), string(a)).Result()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, failed("balance of "+string(a), err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: balance %q of %s", errFormat, v, a)
	}
	return n, nil
}

// Balances reads every account's money as the ledger counts it: its
// balance and what its pending holds set aside (a hold moves nothing in
// the ledger until it is posted). One pipelined read of every group,
// O(accounts), for the reconciler.
func (s *Store) Balances(ctx context.Context) (map[seckill.FundsAccount]int64, error) {
	cmds := make([]*redis.MapStringStringCmd, 2*s.cfg.Groups)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g := range s.cfg.Groups {
			cmds[2*g] = p.HGetAll(ctx, s.keys.Funds(g).Balances())
			cmds[2*g+1] = p.HGetAll(ctx, s.keys.Funds(g).Held())
		}
		return nil
	})
	if err != nil {
		return nil, failed("read the balances", err)
	}
	out := map[seckill.FundsAccount]int64{}
	for _, c := range cmds {
		for a, v := range c.Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: balance %q of %s", errFormat, v, a)
			}
			out[seckill.FundsAccount(a)] += n
		}
	}
	return out, nil
}

// Retention is how long the records of movements live in Redis.
func (s *Store) Retention() time.Duration { return s.cfg.Retention }

// Remember writes the records of movements made (the ledger's, after
// Redis lost its data) where none is kept, as funds.lua writes them, so a
// retry of one finds it made rather than making it again. Each lives what
// is left of the records' retention after its movement's time (as of
// now); one round trip per rememberChunk.
func (s *Store) Remember(ctx context.Context, ms []seckill.Movement, now time.Time) error {
	for len(ms) > 0 {
		n := min(len(ms), rememberChunk)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range ms[:n] {
				var made time.Time
				for _, t := range m.Transfers {
					if t.At.After(made) {
						made = t.At
					}
				}
				ttl := made.Add(s.cfg.Retention).Sub(now)
				if ttl < time.Second {
					continue // its record would have gone by now
				}
				event, err := EncodeMovement(m)
				if err != nil {
					return err
				}
				rec := "ok|" + strconv.FormatInt(m.Sum(), 10) + "|0|" + event
				p.SetNX(ctx, s.keys.Funds(s.Group(m.Side)).Movement(m.ID), rec, ttl)
			}
			return nil
		})
		if err != nil {
			return failed("remember the movements made", err)
		}
		ms = ms[n:]
	}
	return nil
}

// rememberChunk bounds the records one round trip of Remember writes.
const rememberChunk = 1000

// SetBalances writes balances as they are (the reconciler's repair: the
// ledger's sums after Redis lost its data), each account in its group.
func (s *Store) SetBalances(ctx context.Context, balances map[seckill.FundsAccount]int64) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for a, n := range balances {
			p.HSet(ctx, s.keys.Funds(s.Group(a)).Balances(), string(a), n)
		}
		return nil
	})
	if err != nil {
		return failed("write the balances", err)
	}
	return nil
}
