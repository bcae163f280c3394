package payments

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill"
)

// Provider is where top-ups are paid and payouts sent (provider.Stripe,
// provider.Test).
type Provider interface {
	Checkout(ctx context.Context, t seckill.Topup, returnURL string) (ref, url string, err error)
	// Payout sends a merchant's payout to its account at the provider:
	// the provider's reference; an error wrapping seckill.ErrUnavailable
	// when it could not be reached (try again), any other its refusal for
	// good.
	Payout(ctx context.Context, p seckill.Payout) (ref string, err error)
}

// Webhooks checks a provider's signed webhook and reads what it says of a
// top-up (provider.Verifier).
type Webhooks interface {
	Event(payload []byte, header string, now time.Time) (seckill.PaymentEvent, error)
}

// TestPayer is the test provider's own checkout: the webhook its page
// sends when the shopper pays there or gives up (provider.Test).
type TestPayer interface {
	Webhook(t seckill.Topup, paid bool, now time.Time) (payload []byte, header string)
}

// Topups are the ledger's top-ups (orders.Store).
type Topups interface {
	InsertTopup(ctx context.Context, t seckill.Topup) (seckill.Topup, bool, error)
	Topup(ctx context.Context, id string) (seckill.Topup, error)
	SetTopupCheckout(ctx context.Context, id, ref, url string, now time.Time) error
	SetTopupStatus(ctx context.Context, id string, status seckill.TopupStatus, now time.Time) (bool, error)
}

// errNoTopup is an unknown top-up, or another user's.
var errNoTopup = seckill.Errorf(seckill.CodeNotFound, "No such top-up.")

// StartTopup opens a top-up of amount to user's wallet at the provider:
// the page the shopper pays at is the top-up's CheckoutURL. The wallet is
// credited when the provider's signed webhook says the payment succeeded
// (Webhook), never before. The same request id answers the same top-up.
func (s *Service) StartTopup(ctx context.Context, user, requestID string, amount int64) (seckill.Topup, error) {
	var fs []seckill.FieldError
	if amount < 1 || amount > s.cfg.TopupMax {
		fs = append(fs, seckill.FieldError{Field: "amount_cents", Message: "must be between 1 and " + strconv.FormatInt(s.cfg.TopupMax, 10)})
	}
	if !seckill.ValidRequestID(requestID) {
		fs = append(fs, seckill.FieldError{Field: "request_id", Message: "must be 8 to 64 of A-Z a-z 0-9 _ -"})
	}
	if len(fs) > 0 {
		return seckill.Topup{}, seckill.Invalid(fs...)
	}
	// The wallet's room now: a top-up that could never be credited is
	// refused before anyone pays. (Two at once may still both fit here;
	// the credit checks again, and a refused one ends failed.)
	bal, err := s.wallets.Balance(ctx, seckill.WalletOf(user))
	if err != nil {
		return seckill.Topup{}, err
	}
	if bal > s.cfg.WalletMax-amount {
		return seckill.Topup{}, seckill.ErrBalanceLimit
	}
	now := s.now()
	t, _, err := s.topups.InsertTopup(ctx, seckill.Topup{ID: seckill.NewTopupID(), UserID: user, RequestID: requestID,
		Amount: amount, Currency: s.cfg.Currency, CreatedAt: now})
	if err != nil || t.CheckoutURL != "" || t.Status != seckill.TopupPending {
		return t, err
	}
	if t.Amount != amount {
		return seckill.Topup{}, seckill.Errorf(seckill.CodeInvalid, "This request id was used for another amount.")
	}
	// New, or its page not kept yet (a crash in between): the provider's
	// idempotency key is the top-up's id.
	ref, url, err := s.provider.Checkout(ctx, t, s.cfg.ReturnURL)
	if err != nil {
		return seckill.Topup{}, err
	}
	if err := s.topups.SetTopupCheckout(ctx, t.ID, ref, url, now); err != nil {
		return seckill.Topup{}, err
	}
	t.ProviderRef, t.CheckoutURL = ref, url
	return t, nil
}

// TopupOf returns one of user's top-ups.
func (s *Service) TopupOf(ctx context.Context, user, id string) (seckill.Topup, error) {
	t, err := s.topups.Topup(ctx, id)
	if err != nil || t.UserID != user {
		if err == nil || seckill.CodeOf(err) == seckill.CodeNotFound {
			err = errNoTopup
		}
		return seckill.Topup{}, err
	}
	return t, nil
}

// Webhook acts on the provider's webhook (payload, as received, and its
// signature header): a top-up that succeeded is credited to its wallet,
// once however often it is delivered; one that failed ends failed. A
// signature missing, wrong, too old or too new is
// seckill.ErrInvalidSignature, and an amount or currency that disagrees
// with its top-up invalid; neither credits anything. An event of
// something else, or of a top-up this ledger does not have, is ignored.
func (s *Service) Webhook(ctx context.Context, payload []byte, header string) error {
	now := s.now()
	e, err := s.webhooks.Event(payload, header, now)
	if err != nil {
		return err
	}
	if e.TopupID == "" || !e.Succeeded && !e.Failed {
		return nil
	}
	t, err := s.topups.Topup(ctx, e.TopupID)
	if seckill.CodeOf(err) == seckill.CodeNotFound {
		slog.Warn("payments: a webhook for an unknown top-up", "topup", e.TopupID, "event", e.ID)
		return nil
	}
	if err != nil {
		return err
	}
	if e.Failed {
		_, err := s.topups.SetTopupStatus(ctx, t.ID, seckill.TopupFailed, now)
		return err
	}
	if e.Amount != t.Amount || !strings.EqualFold(e.Currency, t.Currency) {
		return seckill.Errorf(seckill.CodeInvalid, "The payment's amount or currency disagrees with its top-up.")
	}
	_, _, err = s.wallets.Move(ctx, seckill.TopupMovement(t.ID, t.UserID, t.Amount, now))
	status := seckill.TopupSucceeded
	switch {
	case errors.Is(err, seckill.ErrBalanceLimit):
		// Paid, yet the wallet has no room for it now (another credit came
		// first): it ends failed, for the provider's refund.
		slog.Error("payments: a paid top-up does not fit its wallet; refund it at the provider", "topup", t.ID, "ref", t.ProviderRef)
		status = seckill.TopupFailed
	case err != nil:
		return err
	}
	_, err = s.topups.SetTopupStatus(ctx, t.ID, status, now)
	return err
}

// errNotTestProvider refuses the test page on a real provider.
var errNotTestProvider = seckill.Errorf(seckill.CodeNotFound, "No such page.")

// TestPage is the top-up the test provider's page shows (it stands in for
// the provider's own checkout: anyone holding its address may pay it).
func (s *Service) TestPage(ctx context.Context, id string) (seckill.Topup, error) {
	if _, ok := s.provider.(TestPayer); !ok {
		return seckill.Topup{}, errNotTestProvider
	}
	return s.topups.Topup(ctx, id)
}

// TestPay is the test provider's page paying (paid) or abandoning top-up
// id: it sends the signed webhook the provider would, through Webhook.
func (s *Service) TestPay(ctx context.Context, id string, paid bool) (seckill.Topup, error) {
	tp, ok := s.provider.(TestPayer)
	if !ok {
		return seckill.Topup{}, errNotTestProvider
	}
	t, err := s.topups.Topup(ctx, id)
	if err != nil {
		return seckill.Topup{}, err
	}
	payload, header := tp.Webhook(t, paid, s.now())
	if err := s.Webhook(ctx, payload, header); err != nil {
		return seckill.Topup{}, err
	}
	return s.topups.Topup(ctx, id)
}
