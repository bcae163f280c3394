package funds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/lua"
)

// Holds: an instant checkout across Cluster slots (package checkout)
// takes the charge of the order a buy request would get from the buyer's
// wallet first, as a pending hold (hold.lua), then posts it once the
// order exists or voids it. A hold belongs to its request (seckill.HoldID):
// every attempt at the request shares it and the order id the first one
// chose. A posted hold leaves the charge's record as funds.lua leaves a
// movement made, and its event in the group's outbox; a void leaves the
// barrier a late hold finds.

var holdScript = redis.NewScript(lua.Hold)

// Hold takes charge m's amount from the wallet it is decided on and keeps
// it held under id, the hold of the buy request request, until it is
// posted or voided; the stock step refuses it after deadline. When the
// request holds already, nothing changes and the first hold's order and
// deadline are returned (a retry decides the same order). Refusals:
// seckill.ErrInsufficientFunds (nothing kept), seckill.ErrHoldExpired
// (voided before), seckill.ErrOrderPaid (posted before: order is the
// request's order).
func (s *Store) Hold(ctx context.Context, id string, m seckill.Movement, deadline time.Time, request string) (order string, until time.Time, err error) {
	if err := m.Validate(); err != nil {
		return "", time.Time{}, err
	}
	event, err := EncodeMovement(m)
	if err != nil {
		return "", time.Time{}, err
	}
	var charged string
	for _, t := range m.Transfers {
		charged = t.OrderID
	}
	r, err := s.runHold(ctx, "hold", m.Side, id, "", -m.Delta(m.Side), m.Sum(), deadline.UnixMilli(), request, event, charged)
	return r.order, time.UnixMilli(r.deadline), err
}

// Post makes hold id, on wallet, the charge it holds (of id charge): its
// event goes to the ledger. posted is false when it was posted before;
// seckill.ErrOrderCancelled when it was voided (or never held).
func (s *Store) Post(ctx context.Context, wallet seckill.FundsAccount, id, charge string) (posted bool, err error) {
	r, err := s.runHold(ctx, "post", wallet, id, charge, 0, 0, 0, "", "", "")
	return r.changed, err
}

// Void gives a hold's amount back to wallet, or, when nothing was held
// under id, makes sure nothing will be (a barrier: a later Hold answers
// seckill.ErrHoldExpired). voided is true when this call gave money back;
// seckill.ErrOrderPaid when the hold was posted.
func (s *Store) Void(ctx context.Context, wallet seckill.FundsAccount, id string) (voided bool, err error) {
	r, err := s.runHold(ctx, "void", wallet, id, "", 0, 0, 0, "", "", "")
	return r.changed, err
}

// holdReply is hold.lua's answer.
type holdReply struct {
	changed  bool
	order    string
	deadline int64
}

func (s *Store) runHold(ctx context.Context, mode string, wallet seckill.FundsAccount, id, charge string, amount, sum, deadline int64,
	request, event, order string) (holdReply, error) {
	g := s.Group(wallet)
	k := s.keys.Funds(g)
	keys := []string{k.Balances(), k.Held(), k.Movement(id), k.Movement(charge), k.Outbox(), k.Holds()}
	what := fmt.Sprintf("%s %s", mode, id)
	reply, err := s.cfg.Replicas.Run(ctx, s.rdb, holdScript, keys, mode, string(wallet), id, int64(s.cfg.Retention/time.Second),
		amount, sum, deadline, request, event, order)
	if err != nil {
		return holdReply{}, failed(what, err)
	}
	text, err := reply.Text()
	if err != nil {
		return holdReply{}, failed(what, err)
	}
	f := strings.Split(text, "|")
	var r holdReply
	if len(f) != 5 {
		return r, fmt.Errorf("%w: reply %q", errFormat, text)
	}
	code, _, changed, err := decodeReply(strings.Join(f[:3], "|"))
	if err != nil {
		return r, err
	}
	r.changed, r.order = changed, f[3]
	if r.deadline, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return r, fmt.Errorf("%w: reply %q", errFormat, text)
	}
	if mode == "post" && changed {
		s.notify(g)
	}
	switch code {
	case seckill.CodeOK:
		return r, nil
	case seckill.CodeInvalid:
		return r, seckill.Errorf(seckill.CodeInvalid, "This request id was used for another amount.")
	}
	return r, fmt.Errorf("funds: %s: %w", what, code.Err())
}

// Held is what the pending holds of an account set aside (0: none).
func (s *Store) Held(ctx context.Context, a seckill.FundsAccount) (int64, error) {
	n, err := s.rdb.HGet(ctx, s.keys.Funds(s.Group(a)).Held(), string(a)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, failed("held of "+string(a), err)
	}
	return n, nil
}

// DueHold is a pending hold whose deadline has passed.
type DueHold struct {
	ID string
	// Charge is the charge it holds (its id, its wallet, its order).
	Charge   seckill.Movement
	Request  string
	Deadline time.Time
}

// Order is the order the hold's charge pays.
func (h DueHold) Order() string {
	for _, t := range h.Charge.Transfers {
		if t.Kind == seckill.TransferCharge {
			return t.OrderID
		}
	}
	return ""
}

// DueHolds lists up to n pending holds of each group whose deadline is
// before before: one pipelined range read of every group, then the
// records of those found. A hold settled meanwhile is dropped from its
// group's list.
func (s *Store) DueHolds(ctx context.Context, before time.Time, n int) ([]DueHold, error) {
	ranges := make([]*redis.StringSliceCmd, s.cfg.Groups)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g := range ranges {
			ranges[g] = p.ZRangeByScore(ctx, s.keys.Funds(g).Holds(), &redis.ZRangeBy{
				Min: "-inf", Max: "(" + strconv.FormatInt(before.UnixMilli(), 10), Count: int64(n)})
		}
		return nil
	})
	if err != nil {
		return nil, failed("read the due holds", err)
	}
	type rec struct {
		g   int
		id  string
		cmd *redis.StringCmd
	}
	var recs []rec
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g, c := range ranges {
			for _, id := range c.Val() {
				recs = append(recs, rec{g: g, id: id, cmd: p.Get(ctx, s.keys.Funds(g).Movement(id))})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, failed("read the due holds' records", err)
	}
	var out []DueHold
	for _, r := range recs {
		h, ok, err := decodeHold(r.id, r.cmd.Val())
		if err != nil {
			// Not one this code wrote: left where it is for an operator,
			// the rest settled all the same.
			slog.Error("funds: a due hold's record cannot be read", "hold", r.id, "err", err)
			continue
		}
		if !ok { // settled since it was listed, or its record lapsed
			if err := s.rdb.ZRem(ctx, s.keys.Funds(r.g).Holds(), r.id).Err(); err != nil {
				return nil, failed("forget hold "+r.id, err)
			}
			continue
		}
		out = append(out, h)
	}
	return out, nil
}

// decodeHold reads a pending hold's record,
// "hold|sum|deadline|request|amount|event"; ok is false for another
// state.
func decodeHold(id, rec string) (DueHold, bool, error) {
	f := strings.SplitN(rec, "|", 6)
	if len(f) != 6 || f[0] != "hold" {
		return DueHold{}, false, nil
	}
	deadline, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return DueHold{}, false, fmt.Errorf("%w: hold %q", errFormat, rec)
	}
	m, err := DecodeMovement(f[5])
	if err != nil {
		return DueHold{}, false, err
	}
	return DueHold{ID: id, Charge: m, Request: f[3], Deadline: time.UnixMilli(deadline)}, true, nil
}
