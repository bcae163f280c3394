package tickets_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/tickets"
)

// rules is a sale's settings as the gate reads them.
type rules seckill.Stock

func (r rules) Rules(context.Context, int64) (seckill.Stock, error) { return seckill.Stock(r), nil }
func (r rules) Stock(context.Context, int64) (seckill.Stock, error) { return seckill.Stock(r), nil }

// stock accepts every buy that reaches it and keeps them.
type stock struct{ got []seckill.Buy }

func (s *stock) Reserve(_ context.Context, _ int64, buys []seckill.Buy) (seckill.Decision, error) {
	s.got = append(s.got, buys...)
	d := seckill.Decision{Available: 5}
	for _, b := range buys {
		d.Answers = append(d.Answers, seckill.Answer{Code: seckill.CodeOK, Qty: b.Qty, OrderID: "o-" + b.UserID})
	}
	return d, nil
}

// accounts says who is verified now; it counts its looks.
type accounts struct {
	verified map[string]bool
	down     bool
	looks    int
}

func (a *accounts) Verified(_ context.Context, user string) (bool, error) {
	a.looks++
	if a.down {
		return false, errors.New("ledger down")
	}
	return a.verified[user], nil
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

func gate(r rules, next *stock, acc tickets.Accounts) *tickets.Gate {
	return tickets.NewGate(next, tickets.New(r, nil, testKey, testKey, time.Minute, time.Now), acc)
}

func codes(d seckill.Decision) string {
	var out []string
	for _, a := range d.Answers {
		out = append(out, string(a.Code))
	}
	return fmt.Sprint(out)
}

// TestGateVerifiedSince: on a verified_only sale, a buyer whose session
// says not verified but whose account is verified now goes on as
// verified; one not verified now, or whose account cannot be read, is
// refused not_eligible before the stock (nothing kept for its request).
// Verified now, the sale's other rules still apply.
func TestGateVerifiedSince(t *testing.T) {
	only := rules{VerifiedOnly: true}
	acc := &accounts{verified: map[string]bool{"a_since": true}}
	ctx := context.Background()

	next := &stock{}
	buys := []seckill.Buy{{UserID: "u_guest", Qty: 1}, {UserID: "a_since", Qty: 1}, {UserID: "a_never", Qty: 1}, {UserID: "a_signed", Qty: 1, Verified: true}}
	d, err := gate(only, next, acc).Reserve(ctx, 1, buys)
	if err != nil || codes(d) != "[not_eligible ok not_eligible ok]" || d.Answers[1].OrderID != "o-a_since" || d.Available != 5 {
		t.Fatalf("decision %+v, %v", d, err)
	}
	if len(next.got) != 2 || next.got[0].UserID != "a_since" || !next.got[0].Verified || next.got[1].UserID != "a_signed" {
		t.Errorf("the stock got %+v", next.got)
	}
	if buys[1].Verified {
		t.Error("the caller's buy was changed")
	}
	if acc.looks != 3 { // the three refused, not the one whose session says verified
		t.Errorf("%d looks at the accounts, want 3", acc.looks)
	}

	for name, g := range map[string]*tickets.Gate{
		"no accounts":   gate(only, next, nil),
		"accounts down": gate(only, next, &accounts{down: true, verified: acc.verified}),
	} {
		next.got = nil
		d, err := g.Reserve(ctx, 1, []seckill.Buy{{UserID: "a_since", Qty: 1}})
		if err != nil || codes(d) != "[not_eligible]" || len(next.got) != 0 {
			t.Errorf("%s: %+v, %v; the stock got %+v", name, d, err, next.got)
		}
	}

	// Verified since, on a sale that also requires a ticket: the ticket's
	// refusal, as for any verified buyer.
	d, err = gate(rules{VerifiedOnly: true, RequireTicket: true}, next, acc).Reserve(ctx, 1, []seckill.Buy{{UserID: "a_since", Qty: 1}})
	if err != nil || codes(d) != "[ticket_required]" {
		t.Errorf("a sale requiring a ticket: %+v, %v", d, err)
	}

	// A sale open to all asks nobody.
	acc.looks = 0
	if d, err := gate(rules{}, next, acc).Reserve(ctx, 1, []seckill.Buy{{UserID: "a_never", Qty: 1}}); err != nil || codes(d) != "[ok]" || acc.looks != 0 {
		t.Errorf("an open sale: %+v, %v, %d looks", d, err, acc.looks)
	}
}
