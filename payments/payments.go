// Package payments is the application of money: a shopper's wallet and
// its statement, the operator's goodwill credits, the merchants' and the
// platform's balances and statements (and, as they come, top-ups through
// the payment provider, refunds and payouts). Money is decided in Redis
// (package funds: one atomic step per movement on the account it checks)
// and kept for good in the ledger's transfers (package orders), which the
// funds relay and consumer fill; this package says who may move what.
// Paying an order is package sales' (the order's row and its charge go
// together).
package payments

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill"
)

// Wallets are the balances in Redis (funds.Store).
type Wallets interface {
	Move(ctx context.Context, m seckill.Movement) (int64, bool, error)
	MoveKeeping(ctx context.Context, m seckill.Movement, keep int64) (int64, bool, error)
	Cancel(ctx context.Context, side seckill.FundsAccount, target string, at time.Time) (bool, error)
	Balance(ctx context.Context, a seckill.FundsAccount) (int64, error)
	Held(ctx context.Context, a seckill.FundsAccount) (int64, error)
	Keep(ctx context.Context, side seckill.FundsAccount) error
}

// Ledger is the funds ledger (orders.Store): an account's statement, and
// the transaction an audited change runs in.
type Ledger interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	Statement(ctx context.Context, a seckill.FundsAccount, before string, limit int) ([]seckill.StatementLine, error)
}

// Auditor records a change in the audit log (audit.Service).
type Auditor interface {
	Record(ctx context.Context, e seckill.AuditEntry) error
}

// Config is what the service needs to know.
type Config struct {
	// Currency is the ISO 4217 code of every amount.
	Currency string
	// WalletMax bounds a wallet; TopupMax one top-up.
	WalletMax, TopupMax int64
	// ReturnURL is where a shopper comes back to from the provider's page.
	ReturnURL string
	// PayoutAccountRequired refuses a payout of a merchant without an
	// account at the provider (Stripe's connected account).
	PayoutAccountRequired bool
}

// Service runs the operations on money.
type Service struct {
	wallets   Wallets
	ledger    Ledger
	topups    Topups
	orders    Orders
	stock     Releaser
	audit     Auditor
	provider  Provider
	webhooks  Webhooks
	payouts   Payouts
	merchants Merchants
	cfg       Config
	now       func() time.Time
}

// Deps are what a Service runs on.
type Deps struct {
	Wallets Wallets
	// Ledger and Topups are the ledger (orders.Store).
	Ledger   Ledger
	Topups   Topups
	Orders   Orders
	Stock    Releaser
	Audit    Auditor
	Provider Provider
	Webhooks Webhooks
	// Payouts are the ledger's (orders.Store); Merchants the merchants
	// (merchants.Service).
	Payouts   Payouts
	Merchants Merchants
}

// New returns a Service on the clock now.
func New(d Deps, cfg Config, now func() time.Time) *Service {
	return &Service{wallets: d.Wallets, ledger: d.Ledger, topups: d.Topups, orders: d.Orders, stock: d.Stock, audit: d.Audit, provider: d.Provider,
		webhooks: d.Webhooks, payouts: d.Payouts, merchants: d.Merchants, cfg: cfg, now: now}
}

// Balance is an account's money as its owner sees it.
type Balance struct {
	Account  seckill.FundsAccount
	Cents    int64
	Held     int64
	Currency string
}

// Wallet is a shopper's balance now (0 for one that never held money),
// and what instant checkouts under way hold of it.
func (s *Service) Wallet(ctx context.Context, user string) (Balance, error) {
	b, err := s.balance(ctx, seckill.WalletOf(user))
	if err != nil {
		return b, err
	}
	b.Held, err = s.wallets.Held(ctx, b.Account)
	return b, err
}

func (s *Service) balance(ctx context.Context, a seckill.FundsAccount) (Balance, error) {
	n, err := s.wallets.Balance(ctx, a)
	if err != nil {
		return Balance{}, err
	}
	return Balance{Account: a, Cents: n, Currency: s.cfg.Currency}, nil
}

// The lines one statement page holds: at most, and when none is asked.
const (
	MaxPage     = 200
	DefaultPage = 50
)

// Transfers is a page of a shopper's statement, newest first.
func (s *Service) Transfers(ctx context.Context, user, before string, limit int) ([]seckill.StatementLine, error) {
	return s.statement(ctx, seckill.WalletOf(user), before, limit)
}

func (s *Service) statement(ctx context.Context, a seckill.FundsAccount, before string, limit int) ([]seckill.StatementLine, error) {
	if limit <= 0 {
		limit = DefaultPage
	}
	return s.ledger.Statement(ctx, a, before, min(limit, MaxPage))
}

// adminAccount is the account an admin reads: a merchant its own; the
// operator a merchant's (merchant > 0) or the platform's.
func adminAccount(ctx context.Context, merchant int64) (seckill.FundsAccount, error) {
	a := seckill.ActorOf(ctx)
	switch {
	case a.Role == seckill.RoleMerchant && (merchant == 0 || merchant == a.MerchantID):
		return seckill.MerchantAccountOf(a.MerchantID), nil
	case a.Role == seckill.RoleMerchant:
		return "", seckill.Errorf(seckill.CodeForbidden, "A merchant sees its own balance only.")
	case a.Role == seckill.RoleOperator || a.Role == seckill.RoleSystem:
		return seckill.MerchantAccountOf(merchant), nil
	}
	return "", seckill.ErrForbidden
}

// AccountBalance is an admin's view of a balance: a merchant's own, or
// for the operator a merchant's (merchant > 0) or the platform's.
func (s *Service) AccountBalance(ctx context.Context, merchant int64) (Balance, error) {
	a, err := adminAccount(ctx, merchant)
	if err != nil {
		return Balance{}, err
	}
	return s.balance(ctx, a)
}

// AccountStatement is a page of the statement AccountBalance's account.
func (s *Service) AccountStatement(ctx context.Context, merchant int64, before string, limit int) ([]seckill.StatementLine, error) {
	a, err := adminAccount(ctx, merchant)
	if err != nil {
		return nil, err
	}
	return s.statement(ctx, a, before, limit)
}

// errOperatorOnly refuses a goodwill credit to anyone but the operator.
var errOperatorOnly = seckill.Errorf(seckill.CodeForbidden, "Only the operator credits wallets.")

// Credit is the operator's goodwill: amount from the platform's account
// to user's wallet, once per request id (a retry answers the same; the
// same id for another amount is refused), recorded in the audit log.
func (s *Service) Credit(ctx context.Context, user, requestID, reason string, amount int64) (seckill.Transfer, error) {
	if seckill.ActorOf(ctx).Role != seckill.RoleOperator {
		return seckill.Transfer{}, errOperatorOnly
	}
	var fs []seckill.FieldError
	if amount < 1 || amount > s.cfg.WalletMax {
		fs = append(fs, seckill.FieldError{Field: "amount_cents", Message: "must be between 1 and " + strconv.FormatInt(s.cfg.WalletMax, 10)})
	}
	if !seckill.ValidRequestID(requestID) {
		fs = append(fs, seckill.FieldError{Field: "request_id", Message: "must be 8 to 64 of A-Z a-z 0-9 _ -"})
	}
	if msg := seckill.CheckText(reason, 200); msg != "" {
		fs = append(fs, seckill.FieldError{Field: "reason", Message: msg})
	}
	if !seckill.ValidUserID(user) {
		fs = append(fs, seckill.FieldError{Field: "user_id", Message: "is not a user id"})
	}
	if len(fs) > 0 {
		return seckill.Transfer{}, seckill.Invalid(fs...)
	}
	m := seckill.CreditMovement(user, requestID, amount, s.now())
	err := s.audited(ctx, m, seckill.AuditEntry{Action: seckill.AuditWalletCredit},
		map[string]any{"user_id": user, "amount_cents": amount, "reason": reason, "transfer_id": m.ID})
	if err != nil {
		return seckill.Transfer{}, err
	}
	return m.Transfers[0], nil
}

// errRetried rolls back the audit row of a movement made before: a retry
// records nothing new.
var errRetried = errors.New("payments: a retry")

// audited makes movement m with its audit row e (after: what it shows),
// as sales makes a change: the row in the ledger's transaction, the
// movement in Redis last before the commit, so a refusal leaves no row; a
// retry of a movement made before writes no second one.
func (s *Service) audited(ctx context.Context, m seckill.Movement, e seckill.AuditEntry, after map[string]any) error {
	e.After, _ = json.Marshal(after)
	err := s.ledger.InTx(ctx, func(ctx context.Context) error {
		if err := s.audit.Record(ctx, e); err != nil {
			return err
		}
		_, made, err := s.wallets.Move(ctx, m)
		if err == nil && !made {
			err = errRetried
		}
		return err
	})
	if errors.Is(err, errRetried) {
		// The movement made before may have been kept only in a
		// transaction that rolled back (embedded mode): kept now, out of
		// this one, before the retry is answered.
		return s.wallets.Keep(ctx, m.Side)
	}
	return err
}

// Orders are the ledger's orders as a refund changes them (orders.Store).
type Orders interface {
	OrderForUpdate(ctx context.Context, id string) (seckill.Order, error)
	SetRefunded(ctx context.Context, id string, now time.Time) (bool, error)
	OrderTransfers(ctx context.Context, order string) ([]seckill.Transfer, error)
	AddMovement(ctx context.Context, sale int64, order string, delta int64, reason seckill.Reason, now time.Time) error
	Sale(ctx context.Context, id int64) (seckill.Sale, error)
}

// Releaser puts an order's units back on its sale, once (inventory.Store).
type Releaser interface {
	Release(ctx context.Context, sale int64, orderID, userID string, qty int64) (int64, bool, error)
}

var (
	errNotPaid       = seckill.Errorf(seckill.CodeInvalid, "Only a paid order can be refunded.")
	errChargeInLimbo = seckill.Errorf(seckill.CodeUnavailable, "The order's payment is not in the ledger yet; retry in a moment.")
	errOrderInLimbo  = seckill.Errorf(seckill.CodeUnavailable, "The order is paid but not in the ledger yet; retry in a moment.")
)

// Refund refunds a paid order, once: its amount back to the buyer's
// wallet, from the merchant what it kept and from the platform its fee
// (seckill.RefundOf the order's charge, as the ledger holds it), the order
// refunded and its units back on its sale, audited with reason. The
// sale's merchant or the operator may; another merchant's order is
// unknown. A merchant whose account holds less than it kept (past what it
// must keep, as for a payout) is refused (seckill.ErrInsufficientFunds);
// a refunded order is seckill.ErrOrderRefunded.
func (s *Service) Refund(ctx context.Context, id, reason string) (seckill.Order, error) {
	reason = strings.TrimSpace(reason)
	if msg := seckill.CheckText(reason, 200); msg != "" {
		return seckill.Order{}, seckill.Invalid(seckill.FieldError{Field: "reason", Message: msg})
	}
	var o seckill.Order
	var missing bool // the ledger holds no such order (yet)
	err := s.ledger.InTx(ctx, func(ctx context.Context) error {
		var err error
		if o, err = s.orders.OrderForUpdate(ctx, id); err != nil {
			missing = errors.Is(err, seckill.ErrOrderNotFound)
			return err
		}
		sale, err := s.orders.Sale(ctx, o.SaleID)
		if err != nil {
			return err
		}
		if !seckill.ActorOf(ctx).Owns(sale.MerchantID) {
			return seckill.ErrOrderNotFound // another merchant's order is as an unknown one
		}
		switch o.Status {
		case seckill.OrderRefunded:
			return seckill.ErrOrderRefunded
		case seckill.OrderCancelled:
			return seckill.ErrOrderCancelled
		case seckill.OrderPending:
			return errNotPaid
		}
		now := s.now()
		after, _ := json.Marshal(map[string]any{"order_id": o.ID, "amount_cents": o.AmountCents, "qty": o.Qty, "reason": reason})
		if err := s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditOrderRefund, SaleID: sale.ID, Owner: sale.MerchantID,
			After: after}); err != nil {
			return err
		}
		if err := s.orders.AddMovement(ctx, o.SaleID, o.ID, o.Qty, seckill.ReasonCancel, now); err != nil {
			return err
		}
		if _, err := s.orders.SetRefunded(ctx, o.ID, now); err != nil {
			return err
		}
		if o.ChargeID != "" {
			ts, err := s.orders.OrderTransfers(ctx, o.ID)
			if err != nil {
				return err
			}
			charge := seckill.Movement{ID: o.ChargeID}
			for _, t := range ts {
				if t.Kind == seckill.TransferCharge || t.Kind == seckill.TransferFee && t.Debit != seckill.PlatformAccount {
					charge.Transfers = append(charge.Transfers, t)
				}
			}
			if len(charge.Transfers) == 0 {
				return errChargeInLimbo
			}
			refund := seckill.RefundOf(charge, now)
			keep, err := s.kept(ctx, refund.Side)
			if err != nil {
				return err
			}
			if _, _, err := s.wallets.MoveKeeping(ctx, refund, keep); err != nil {
				return err
			}
		}
		// Redis last: the units go back once (release.lua), whatever a
		// retry; a failure here rolls the ledger back, and the refund's
		// money, made already, is found made by the retry.
		_, _, err = s.stock.Release(ctx, o.SaleID, o.ID, o.UserID, o.Qty)
		if errors.Is(err, seckill.ErrSaleNotFound) {
			err = nil // its keys are gone long after its end: no units to return
		}
		if err != nil {
			return err
		}
		t := now.UTC()
		o.Status, o.RefundedAt = seckill.OrderRefunded, &t
		return nil
	})
	if missing && s.chargedToActor(ctx, id) {
		err = errOrderInLimbo
	}
	return o, err
}

// chargedToActor says whether the ledger holds a charge of order id that
// paid the actor (the operator: any): a payment does not wait for its
// order to reach the ledger, so the charge may be there a moment before
// it.
func (s *Service) chargedToActor(ctx context.Context, id string) bool {
	ts, err := s.orders.OrderTransfers(ctx, id)
	if err != nil {
		return false
	}
	a := seckill.ActorOf(ctx)
	for _, t := range ts {
		if t.Kind == seckill.TransferCharge && (a.Owns(0) || t.Credit == seckill.MerchantAccountOf(a.MerchantID)) {
			return true
		}
	}
	return false
}
