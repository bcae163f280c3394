package tickets

import (
	"context"
	"slices"

	"github.com/seckill/seckill"
)

// Reserver decides buys of a sale (the batcher, the stock behind it).
type Reserver interface {
	Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error)
}

// Accounts says whether a buyer's identity is verified now
// (identity.Accounts); false for a user who is no account.
type Accounts interface {
	Verified(ctx context.Context, user string) (bool, error)
}

// Gate stands in front of the stock and checks each buy against its
// sale's rules (CheckBuy: a verified buyer, a good pass, a good ticket):
// a buy refused is answered not_eligible, pass_required, pass_invalid,
// ticket_required or ticket_invalid and goes no further, so its request
// id keeps no answer and a retry that meets the rules is decided afresh.
//
// A buy carries what its session said of the buyer at sign-in. A buyer
// who verified after the session was issued (an email confirmed on
// another device) is not refused: before a buy is answered not_eligible,
// the gate asks accounts, and a buyer verified now goes on as verified.
type Gate struct {
	next     Reserver
	tickets  *Service
	accounts Accounts
}

// NewGate returns a gate in front of next, checking with tickets, and
// with accounts (nil: none) whether a buyer refused as not verified has
// been verified since.
func NewGate(next Reserver, tickets *Service, accounts Accounts) *Gate {
	return &Gate{next: next, tickets: tickets, accounts: accounts}
}

// Reserve answers the buys without a good ticket and passes the rest to
// the next Reserver; the decision's Available and Closed are the next
// one's (zero when no buy got through).
func (g *Gate) Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error) {
	var refused []seckill.Code // by buy; nil while every buy passes
	var fresh []seckill.Buy    // the buys as they go on, once one is found verified since
	for i, b := range buys {
		err := g.tickets.CheckBuy(ctx, sale, b)
		if err != nil && seckill.CodeOf(err) == seckill.CodeNotEligible && g.verifiedNow(ctx, b.UserID) {
			if fresh == nil {
				fresh = slices.Clone(buys)
			}
			fresh[i].Verified = true
			err = g.tickets.CheckBuy(ctx, sale, fresh[i])
		}
		if err == nil {
			continue
		}
		code := seckill.CodeOf(err)
		switch code {
		case seckill.CodeTicketRequired, seckill.CodeTicketInvalid, seckill.CodeNotEligible,
			seckill.CodePassRequired, seckill.CodePassInvalid:
		default:
			return seckill.Decision{}, err
		}
		if refused == nil {
			refused = make([]seckill.Code, len(buys))
		}
		refused[i] = code
	}
	if fresh != nil {
		buys = fresh
	}
	if refused == nil {
		return g.next.Reserve(ctx, sale, buys)
	}
	var pass []seckill.Buy
	for i, b := range buys {
		if refused[i] == "" {
			pass = append(pass, b)
		}
	}
	var d seckill.Decision
	if len(pass) > 0 {
		var err error
		if d, err = g.next.Reserve(ctx, sale, pass); err != nil {
			return seckill.Decision{}, err
		}
	}
	answers := make([]seckill.Answer, len(buys))
	for i, j := 0, 0; i < len(buys); i++ {
		if refused[i] != "" {
			answers[i] = seckill.Answer{Code: refused[i], Qty: buys[i].Qty}
			continue
		}
		answers[i] = d.Answers[j]
		j++
	}
	d.Answers = answers
	return d, nil
}

// verifiedNow says whether user's identity has been verified since its
// session was issued; a failed look keeps the session's word.
func (g *Gate) verifiedNow(ctx context.Context, user string) bool {
	if g.accounts == nil {
		return false
	}
	ok, err := g.accounts.Verified(ctx, user)
	return err == nil && ok
}
