package payments

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/seckill/seckill"
)

// Payouts are the ledger's payouts (orders.Store), and what a merchant
// received that a void may still take back.
type Payouts interface {
	InsertPayout(ctx context.Context, p seckill.Payout) (seckill.Payout, bool, error)
	SetPayoutStatus(ctx context.Context, id string, status seckill.PayoutStatus, ref string, now time.Time) (bool, error)
	Unsettled(ctx context.Context, a seckill.FundsAccount) (int64, error)
}

// Merchants check a merchant's second factor (merchants.Service).
type Merchants interface {
	Confirmed(ctx context.Context, id int64, code string) (seckill.Merchant, error)
}

var (
	errMerchantsOnly = seckill.Errorf(seckill.CodeForbidden, "Only a merchant pays out its own balance.")
	errNoAccount     = seckill.Errorf(seckill.CodeInvalid, "This merchant has no payout account at the provider yet: the operator sets it.")
	errOtherAmount   = seckill.Errorf(seckill.CodeInvalid, "This request id was used for another amount.")
	errPayoutTooMuch = seckill.Errorf(seckill.CodeInsufficientFunds,
		"Your account holds less than that: you can pay out its balance, less payments not settled yet.")
)

// Payout sends amount of the acting merchant's account to its bank
// through the provider, once per request id; created is false for a
// retry. The second factor's code comes first (once enrolled); then, in
// the ledger's transaction, the payout's row and its audit row, and last
// the money leaving the account in Redis, refused with
// seckill.ErrInsufficientFunds when it would leave less than the charges
// a void may still take back. Then the provider: one that refuses it ends
// it failed and the money comes back (the movement cancelled, exactly);
// one that cannot be reached leaves it pending, and the same request id
// tries again (the payout's id is the provider's idempotency key).
func (s *Service) Payout(ctx context.Context, requestID, code string, amount int64) (p seckill.Payout, created bool, err error) {
	a := seckill.ActorOf(ctx)
	if a.Role != seckill.RoleMerchant || a.MerchantID <= 0 {
		return seckill.Payout{}, false, errMerchantsOnly
	}
	var fs []seckill.FieldError
	if amount < 1 || amount > seckill.MaxAmountCents {
		fs = append(fs, seckill.FieldError{Field: "amount_cents", Message: "must be between 1 and " + strconv.FormatInt(seckill.MaxAmountCents, 10)})
	}
	if !seckill.ValidRequestID(requestID) {
		fs = append(fs, seckill.FieldError{Field: "request_id", Message: "must be 8 to 64 of A-Z a-z 0-9 _ -"})
	}
	if len(fs) > 0 {
		return seckill.Payout{}, false, seckill.Invalid(fs...)
	}
	m, err := s.merchants.Confirmed(ctx, a.MerchantID, code)
	if err != nil {
		return seckill.Payout{}, false, err
	}
	if s.cfg.PayoutAccountRequired && m.PayoutAccount == "" {
		return seckill.Payout{}, false, errNoAccount
	}
	account, now := seckill.MerchantAccountOf(a.MerchantID), s.now()
	err = s.ledger.InTx(ctx, func(ctx context.Context) error {
		var err error
		p, created, err = s.payouts.InsertPayout(ctx, seckill.Payout{ID: seckill.PayoutIDOf(a.MerchantID, requestID),
			MerchantID: a.MerchantID, RequestID: requestID, Amount: amount, CreatedAt: now})
		if err != nil || !created {
			return err
		}
		after, _ := json.Marshal(map[string]any{"payout_id": p.ID, "amount_cents": amount})
		if err := s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditPayout, Owner: a.MerchantID, After: after}); err != nil {
			return err
		}
		unsettled, err := s.payouts.Unsettled(ctx, account)
		if err != nil {
			return err
		}
		// Redis last: a refusal leaves no row; a commit that fails after
		// it leaves the movement made, which the retry (the same payout
		// id) finds made rather than making again.
		_, _, err = s.wallets.MoveKeeping(ctx, seckill.PayoutMovement(p.ID, a.MerchantID, amount, now), unsettled)
		return err
	})
	switch {
	case errors.Is(err, seckill.ErrInsufficientFunds):
		return seckill.Payout{}, false, errPayoutTooMuch
	case err != nil:
		return seckill.Payout{}, false, err
	case p.Amount != amount:
		return seckill.Payout{}, false, errOtherAmount
	case p.Status == seckill.PayoutFailed:
		return p, created, s.giveBack(ctx, p) // once more: a crash may have come between
	case p.Status != seckill.PayoutPending:
		return p, created, nil
	}
	ref, err := s.provider.Payout(ctx, p, m.PayoutAccount, s.cfg.Currency)
	switch {
	case err == nil:
		p.Status, p.ProviderRef = seckill.PayoutPaid, ref
	case errors.Is(err, seckill.ErrUnavailable) || ctx.Err() != nil:
		return p, created, err // pending: the same request id tries again
	default:
		p.Status = seckill.PayoutFailed
	}
	// Failed before the money comes back: a payout whose money came back
	// is never sent again, even by a retry that finds it pending.
	if _, err := s.payouts.SetPayoutStatus(ctx, p.ID, p.Status, ref, s.now()); err != nil {
		return p, created, err
	}
	if p.Status == seckill.PayoutFailed {
		return p, created, s.giveBack(ctx, p)
	}
	return p, created, nil
}

// giveBack returns a failed payout's money to its merchant: its movement
// cancelled, once however often.
func (s *Service) giveBack(ctx context.Context, p seckill.Payout) error {
	_, err := s.wallets.Cancel(ctx, seckill.MerchantAccountOf(p.MerchantID), seckill.PayoutID(p.ID), s.now())
	return err
}
