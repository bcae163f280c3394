package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/seckill/seckill"
)

// Stripe takes top-ups through Stripe Checkout.
type Stripe struct {
	client *stripe.Client
}

// NewStripe returns the provider with key, its API at base ("" for
// Stripe's own; tests point it at stripe-mock). The SDK does not retry:
// a failed call is the caller's to retry, with the same idempotency key.
func NewStripe(key, base string) *Stripe {
	cfg := &stripe.BackendConfig{MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}}
	if base != "" {
		cfg.URL = stripe.String(base)
	}
	return &Stripe{client: stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(cfg)))}
}

// Checkout opens a Checkout Session for top-up t: the shopper pays its
// amount on Stripe's page, then comes back to returnURL. The session
// names the top-up (client_reference_id, and the metadata of the session
// and of its PaymentIntent), and the top-up's id is its idempotency key,
// so a retry opens no second session.
func (s *Stripe) Checkout(ctx context.Context, t seckill.Topup, returnURL string) (ref, url string, err error) {
	meta := map[string]string{"topup_id": t.ID, "user_id": t.UserID}
	p := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		SuccessURL:        stripe.String(returnURL),
		CancelURL:         stripe.String(returnURL),
		ClientReferenceID: stripe.String(t.ID),
		Metadata:          meta,
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String(strings.ToLower(t.Currency)),
				UnitAmount:  stripe.Int64(t.Amount),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String("Wallet top-up")},
			},
		}},
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: meta},
	}
	p.SetIdempotencyKey("topup:" + t.ID)
	cs, err := s.client.V1CheckoutSessions.Create(ctx, p)
	if err != nil {
		return "", "", fmt.Errorf("provider: stripe checkout of %s: %w: %w", t.ID, seckill.ErrUnavailable, err)
	}
	return cs.ID, cs.URL, nil
}

// errNoAccount refuses a payout to a merchant without a connected account.
var errNoAccount = errors.New("provider: no connected account to pay out to")

// Payout sends payout p to the merchant's Stripe connected account
// (p.Account, acct_…) as a Transfer from the platform's balance; Stripe
// pays it to the merchant's bank on the account's schedule (Connect). The
// payout's id is the idempotency key: a retry within Stripe's 24 hours
// sends nothing twice. A failure to reach Stripe, a request of the same
// key still under way (409) or a key's conflict wrap seckill.ErrUnavailable
// (the payout stays pending); any other error is Stripe refusing it.
func (s *Stripe) Payout(ctx context.Context, p seckill.Payout) (string, error) {
	if p.Account == "" {
		return "", errNoAccount
	}
	params := &stripe.TransferCreateParams{
		Amount:        stripe.Int64(p.Amount),
		Currency:      stripe.String(strings.ToLower(p.Currency)),
		Destination:   stripe.String(p.Account),
		TransferGroup: stripe.String(p.ID),
		Metadata:      map[string]string{"payout_id": p.ID, "merchant_id": fmt.Sprint(p.MerchantID)},
	}
	params.SetIdempotencyKey("payout:" + p.ID)
	tr, err := s.client.V1Transfers.Create(ctx, params)
	if err == nil {
		return tr.ID, nil
	}
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 && se.HTTPStatusCode != 409 &&
		se.HTTPStatusCode != 429 && se.Type != stripe.ErrorTypeIdempotency {
		return "", fmt.Errorf("provider: stripe refused payout %s: %s", p.ID, se.Msg)
	}
	return "", fmt.Errorf("provider: stripe payout %s: %w: %w", p.ID, seckill.ErrUnavailable, err)
}
