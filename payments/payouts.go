package payments

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/seckill/seckill"
)

// Payouts are the ledger's payouts (orders.Store), and what it says of a
// merchant's account.
type Payouts interface {
	InsertPayout(ctx context.Context, p seckill.Payout) (seckill.Payout, bool, error)
	Payout(ctx context.Context, id string) (seckill.Payout, error)
	SetPayoutStatus(ctx context.Context, id string, status seckill.PayoutStatus, ref string, now time.Time) (bool, error)
	SetPayoutReturned(ctx context.Context, id string, now time.Time) error
	StalePayouts(ctx context.Context, before time.Time, limit int) ([]seckill.Payout, error)
	Unsettled(ctx context.Context, a seckill.FundsAccount) (int64, error)
	AccountBalance(ctx context.Context, a seckill.FundsAccount) (int64, error)
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

// providerTimeout bounds one call to the provider once the money moved
// (the caller's going away does not cut it short).
const providerTimeout = 30 * time.Second

// Payout sends amount of the acting merchant's account to its bank
// through the provider, once per request id (a retry answers the payout
// as it stands, finishing it). The second factor's code comes first (once
// enrolled); then, in the ledger's transaction, the payout's row and its
// audit row, and last the money leaving the account in Redis, refused
// with seckill.ErrInsufficientFunds when it would leave less than the
// account must keep (kept). Then the provider (settle).
func (s *Service) Payout(ctx context.Context, requestID, code string, amount int64) (seckill.Payout, error) {
	a := seckill.ActorOf(ctx)
	if a.Role != seckill.RoleMerchant || a.MerchantID <= 0 {
		return seckill.Payout{}, errMerchantsOnly
	}
	var fs []seckill.FieldError
	if amount < 1 || amount > seckill.MaxAmountCents {
		fs = append(fs, seckill.FieldError{Field: "amount_cents", Message: "must be between 1 and " + strconv.FormatInt(seckill.MaxAmountCents, 10)})
	}
	if !seckill.ValidRequestID(requestID) {
		fs = append(fs, seckill.FieldError{Field: "request_id", Message: "must be 8 to 64 of A-Z a-z 0-9 _ -"})
	}
	if len(fs) > 0 {
		return seckill.Payout{}, seckill.Invalid(fs...)
	}
	m, err := s.merchants.Confirmed(ctx, a.MerchantID, code)
	if err != nil {
		return seckill.Payout{}, err
	}
	if s.cfg.PayoutAccountRequired && m.PayoutAccount == "" {
		return seckill.Payout{}, errNoAccount
	}
	account, now := seckill.MerchantAccountOf(a.MerchantID), s.now()
	var p seckill.Payout
	err = s.ledger.InTx(ctx, func(ctx context.Context) error {
		var created bool
		var err error
		p, created, err = s.payouts.InsertPayout(ctx, seckill.Payout{ID: seckill.PayoutIDOf(a.MerchantID, requestID),
			MerchantID: a.MerchantID, RequestID: requestID, Amount: amount, Account: m.PayoutAccount, Currency: s.cfg.Currency,
			CreatedAt: now})
		if err != nil || !created {
			return err
		}
		after, _ := json.Marshal(map[string]any{"payout_id": p.ID, "amount_cents": amount, "account": p.Account})
		if err := s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditPayout, Owner: a.MerchantID, After: after}); err != nil {
			return err
		}
		keep, err := s.kept(ctx, account)
		if err != nil {
			return err
		}
		// Redis last: a refusal leaves no row; a commit that fails after
		// it leaves the movement made, which the retry (the same payout
		// id) finds made rather than making again.
		_, _, err = s.wallets.MoveKeeping(ctx, seckill.PayoutMovement(p.ID, a.MerchantID, amount, now), keep)
		return err
	})
	switch {
	case errors.Is(err, seckill.ErrInsufficientFunds):
		return seckill.Payout{}, errPayoutTooMuch
	case err != nil:
		return seckill.Payout{}, err
	case p.Amount != amount:
		return seckill.Payout{}, errOtherAmount
	}
	return s.settle(ctx, p)
}

// kept is what merchant account a must keep after a debit of its own (a
// payout, a refund): the charges a void may still take back (orders.Store
// Unsettled), and what Redis holds beyond the ledger (a void the ledger
// holds that the account has not followed yet). A void follows to the
// merchant without a floor; this keeps it from ever finding the money
// gone.
func (s *Service) kept(ctx context.Context, a seckill.FundsAccount) (int64, error) {
	held, err := s.wallets.Balance(ctx, a)
	if err != nil {
		return 0, err
	}
	unsettled, err := s.payouts.Unsettled(ctx, a)
	if err != nil {
		return 0, err
	}
	ledger, err := s.payouts.AccountBalance(ctx, a)
	if err != nil {
		return 0, err
	}
	return unsettled + max(0, held-ledger), nil
}

// settle takes payout p as far as it goes: a pending one to the provider
// (paid, or failed when it refuses it), a failed one's money back. A
// provider that cannot be reached leaves it pending (the error wraps
// seckill.ErrUnavailable), for a retry or the sweep (SettlePayouts) to
// send again: its id is the provider's idempotency key. Failed is
// written before the money comes back, and only by the call that ended
// it, so a payout is never both sent and returned.
func (s *Service) settle(ctx context.Context, p seckill.Payout) (seckill.Payout, error) {
	// The money moved: what follows finishes whether or not the caller waits.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), providerTimeout)
	defer cancel()
	if p.Status == seckill.PayoutPending {
		ref, err := s.provider.Payout(ctx, p)
		status := seckill.PayoutPaid
		switch {
		case errors.Is(err, seckill.ErrUnavailable):
			return p, err
		case err != nil:
			slog.Warn("payments: the provider refused a payout; its money goes back", "payout", p.ID, "err", err)
			status = seckill.PayoutFailed
		}
		ok, err := s.payouts.SetPayoutStatus(ctx, p.ID, status, ref, s.now())
		if err != nil {
			return p, err
		}
		if !ok { // another call ended it: as it did
			if p, err = s.payouts.Payout(ctx, p.ID); err != nil || p.Status == seckill.PayoutPending {
				return p, err
			}
			return s.settle(ctx, p)
		}
		p.Status, p.ProviderRef = status, ref
	}
	if p.Status == seckill.PayoutFailed && p.ReturnedAt == nil {
		if _, err := s.wallets.Cancel(ctx, seckill.MerchantAccountOf(p.MerchantID), seckill.PayoutID(p.ID), s.now()); err != nil {
			return p, err
		}
		now := s.now()
		if err := s.payouts.SetPayoutReturned(ctx, p.ID, now); err != nil {
			return p, err
		}
		p.ReturnedAt = &now
	}
	return p, nil
}

// SettlePayouts finishes what payouts were left: pending since before
// (the provider not reached, the process gone between its money moving
// and the provider), failed without their money back (gone before it
// came back). It answers how many it finished; one it cannot finish is
// logged and left for the next sweep.
func (s *Service) SettlePayouts(ctx context.Context, before time.Time) (int, error) {
	ps, err := s.payouts.StalePayouts(ctx, before, 100)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ps {
		if _, err := s.settle(ctx, p); err != nil {
			slog.Warn("payments: a payout left unfinished", "payout", p.ID, "status", p.Status, "err", err)
			continue
		}
		n++
	}
	return n, nil
}
