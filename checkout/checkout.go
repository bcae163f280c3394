// Package checkout is the instant checkout where a buyer's wallet and the
// sale live on different Redis Cluster slots, so no one script can decide
// both (on one Redis, buy.lua does: package inventory). It is a two-phase
// transfer, TigerBeetle's pending transfer in Redis:
//
//  1. hold: the charge of the order the buy would get is taken from the
//     wallet and kept pending, with a deadline (funds.Store.Hold);
//  2. the stock step decides the buy carrying the hold (buy.lua refuses a
//     hold past its deadline or not for price × qty);
//  3. the hold is posted if this attempt's order was accepted (its charge
//     goes to the ledger), voided otherwise.
//
// A crash between any two steps resolves by itself: the order consumer
// posts the hold of every order that reaches the ledger, and the Sweeper
// settles holds past their deadline: it asks the sale how the request was
// decided, storing a refusal in its place if it never was (so the stock
// step can no longer accept it), then posts or voids. docs/architecture.md
// ("Instant checkout: stock and money in one decision") draws the states.
package checkout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill/seckill"
)

// Reserver decides buys of a sale (the batcher and the stock behind it).
type Reserver interface {
	Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error)
}

// Wallets hold, post and void charges on buyers' wallets (funds.Store).
type Wallets interface {
	Hold(ctx context.Context, id string, m seckill.Movement, deadline time.Time, request string) (string, time.Time, error)
	Post(ctx context.Context, wallet seckill.FundsAccount, id, charge string) (bool, error)
	Void(ctx context.Context, wallet seckill.FundsAccount, id string) (bool, error)
}

// Stock is what the checkout asks of the sale's live state
// (inventory.Store): whether it has instant checkout, and the stored
// answers of buys decided before.
type Stock interface {
	Instant(ctx context.Context, sale int64) bool
	Lookup(ctx context.Context, sale int64, buys []seckill.Buy) ([]seckill.Answer, []bool, error)
}

// Rules are a sale's settings as the buy path reads them, a second old at
// most (sales.Service): the price and whose sale it is.
type Rules interface {
	Rules(ctx context.Context, sale int64) (seckill.Stock, error)
}

// Config tunes a Checkout.
type Config struct {
	// HoldFor is how long a hold waits for its stock step: its deadline.
	HoldFor time.Duration
	// FeeBps is the platform's share of a charge.
	FeeBps int64
	// SoldOut, if set, says the sale is known sold out or ended
	// (inventory.FastPath.Gather): its buys go on without a hold, for the
	// answer they get needs no wallet.
	SoldOut func(sale int64) bool
	// OnOutcome, if set, counts holds by what became of them inline:
	// posted, voided, left (for the consumer or the sweep), refused.
	OnOutcome func(outcome string)
}

// DefaultHoldFor is a hold's life: far above a stock step's (milliseconds,
// a batch under load included), short enough that money a crash held
// comes back within seconds.
const DefaultHoldFor = 10 * time.Second

// Checkout is the Reserver in front of the batcher on a Cluster: for a
// sale with instant checkout it holds, decides and posts or voids.
type Checkout struct {
	next    Reserver
	wallets Wallets
	stock   Stock
	rules   Rules
	cfg     Config
	now     func() time.Time
}

// New returns a Checkout in front of next.
func New(next Reserver, wallets Wallets, stock Stock, rules Rules, cfg Config) *Checkout {
	if cfg.HoldFor <= 0 {
		cfg.HoldFor = DefaultHoldFor
	}
	return &Checkout{next: next, wallets: wallets, stock: stock, rules: rules, cfg: cfg, now: time.Now}
}

// Reserve decides buys of sale: a sale without instant checkout, one
// known sold out, or one not open now goes straight on; otherwise each
// buy's request is held first (a retry finds its request's hold, and the
// order id its first attempt chose).
func (c *Checkout) Reserve(ctx context.Context, sale int64, buys []seckill.Buy) (seckill.Decision, error) {
	if !c.stock.Instant(ctx, sale) || c.cfg.SoldOut != nil && c.cfg.SoldOut(sale) {
		return c.next.Reserve(ctx, sale, buys)
	}
	rules, err := c.rules.Rules(ctx, sale)
	if err != nil {
		return seckill.Decision{}, err
	}
	if rules.MerchantID < 0 {
		return seckill.Decision{}, fmt.Errorf("checkout: sale %d: %w: its keys predate its merchant", sale, seckill.ErrUnavailable)
	}
	now := c.now()
	switch rules.PhaseAt(now) {
	case seckill.PhaseScheduled, seckill.PhasePaused, seckill.PhaseEnded:
		// Refused by the window, which holds no money (a hold would wait
		// for the sweep); if the rules are a moment behind, buy.lua answers
		// a request without a hold unavailable, and the retry holds.
		return c.next.Reserve(ctx, sale, buys)
	}
	held := make([]seckill.Buy, 0, len(buys))
	answers := make([]seckill.Answer, len(buys))
	short := map[int]bool{} // buys whose wallet was short
	for i, b := range buys {
		b.OrderID = seckill.NewOrderID(sale)
		amount, err := seckill.Amount(b.Qty, rules.PriceCents)
		if err != nil || b.Qty > rules.Limit || amount <= 0 {
			held = append(held, b) // no hold: refused by the stock (the cap), or answered as stored
			continue
		}
		m, _ := seckill.ChargeMovement(seckill.Order{ID: b.OrderID, UserID: b.UserID, AmountCents: amount}, rules.MerchantID, c.cfg.FeeBps, now)
		order, until, err := c.wallets.Hold(ctx, seckill.HoldID(sale, b.UserID, b.RequestID), m, now.Add(c.cfg.HoldFor), b.RequestID)
		switch {
		case errors.Is(err, seckill.ErrInsufficientFunds):
			short[i] = true
			c.count("refused")
			continue
		case errors.Is(err, seckill.ErrHoldExpired), errors.Is(err, seckill.ErrOrderPaid):
			// Decided before (voided after a refusal, posted with its
			// order): the stock answers as it stored.
			if order != "" {
				b.OrderID = order
			}
			held = append(held, b)
			continue
		case err != nil:
			return seckill.Decision{}, err // holds made so far: the sweep
		}
		b.OrderID = order
		b.Hold = &seckill.Hold{Amount: amount, Deadline: until}
		held = append(held, b)
	}
	if len(short) > 0 {
		// A retry of a buy decided before answers its first answer, whatever
		// the wallet holds now.
		if err := c.shortAnswers(ctx, sale, buys, short, answers); err != nil {
			return seckill.Decision{}, err
		}
	}
	var d seckill.Decision
	if len(held) > 0 {
		if d, err = c.next.Reserve(ctx, sale, held); err != nil {
			c.count("left")
			return seckill.Decision{}, err // undecided: the holds wait for the consumer or the sweep
		}
	}
	for i, j := 0, 0; i < len(buys); i++ {
		if short[i] {
			continue
		}
		b, a := held[j], d.Answers[j]
		j++
		answers[i] = a
		if b.Hold != nil {
			c.settle(ctx, sale, b, a)
		}
	}
	d.Answers = answers
	return d, nil
}

// shortAnswers answers the buys refused for want of money: with their
// stored answers when they were decided before, else insufficient_funds.
func (c *Checkout) shortAnswers(ctx context.Context, sale int64, buys []seckill.Buy, short map[int]bool, answers []seckill.Answer) error {
	var ask []seckill.Buy
	var at []int
	for i := range buys {
		if short[i] {
			ask, at = append(ask, buys[i]), append(at, i)
		}
	}
	stored, found, err := c.stock.Lookup(ctx, sale, ask)
	if err != nil {
		return err
	}
	for k, i := range at {
		answers[i] = seckill.Answer{Code: seckill.CodeInsufficientFunds, Qty: buys[i].Qty}
		if found[k] {
			answers[i] = stored[k]
		}
	}
	return nil
}

// settle posts buy b's hold if its order was accepted, voids it if its
// request was refused for good (the refusal is stored: no attempt at it
// can be accepted any more), and otherwise leaves it: a refusal for the
// moment (not started, paused, a price changed since the hold) is not
// stored, and another attempt at the same request, sharing the hold, may
// be on its way to be accepted; the sweep settles it after its deadline. A failure
// leaves the hold to the order consumer (posting) or the sweep.
func (c *Checkout) settle(ctx context.Context, sale int64, b seckill.Buy, a seckill.Answer) {
	wallet, id := seckill.WalletOf(b.UserID), seckill.HoldID(sale, b.UserID, b.RequestID)
	switch {
	case a.Code == seckill.CodeOK && a.OrderID == b.OrderID:
		if _, err := c.wallets.Post(ctx, wallet, id, seckill.ChargeID(a.OrderID)); err != nil {
			slog.Warn("checkout: posting a hold failed; the order consumer posts it", "hold", id, "err", err)
			c.count("left")
			return
		}
		c.count("posted")
	case Final(a.Code):
		if _, err := c.wallets.Void(ctx, wallet, id); err != nil {
			slog.Warn("checkout: voiding a hold failed; the sweep voids it", "hold", id, "err", err)
			c.count("left")
			return
		}
		c.count("voided")
	default:
		c.count("left")
	}
}

// Final reports whether a buy's answer is stored for its request id, so
// every later attempt at it gets the same (buy.lua).
func Final(code seckill.Code) bool {
	switch code {
	case seckill.CodeOK, seckill.CodeSoldOut, seckill.CodeLimitExceeded, seckill.CodeHoldExpired:
		return true
	}
	return false
}

func (c *Checkout) count(outcome string) {
	if c.cfg.OnOutcome != nil {
		c.cfg.OnOutcome(outcome)
	}
}
