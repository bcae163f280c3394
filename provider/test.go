package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill"
)

// Test stands in for the provider in development and embedded mode: its
// checkout is a page of this server (PagePath + the top-up's id), and
// paying there makes the webhook Stripe would send, signed with Secret by
// the SDK's own signer, which the server checks as it checks Stripe's.
// Anyone who reaches the page can pay: production refuses this provider.
type Test struct {
	// Secret signs the webhooks (one of the Verifier's secrets).
	Secret string
	// Base is where shoppers reach this server (public_url).
	Base string
}

// PagePath is where the test provider's checkout pages are served.
const PagePath = "/pay/test/"

// Checkout returns the test page of top-up t.
func (p Test) Checkout(_ context.Context, t seckill.Topup, _ string) (ref, url string, err error) {
	return "test_" + t.ID, strings.TrimRight(p.Base, "/") + PagePath + t.ID, nil
}

// Webhook is the signed webhook the provider would send when the shopper
// paid top-up t at its page (paid) or gave up (its session expired): the
// body and its Stripe-Signature header, at now.
func (p Test) Webhook(t seckill.Topup, paid bool, now time.Time) (payload []byte, header string) {
	typ, status := stripe.EventTypeCheckoutSessionCompleted, stripe.CheckoutSessionPaymentStatusPaid
	if !paid {
		typ, status = stripe.EventTypeCheckoutSessionExpired, stripe.CheckoutSessionPaymentStatusUnpaid
	}
	session, _ := json.Marshal(map[string]any{
		"id": t.ProviderRef, "object": "checkout.session", "client_reference_id": t.ID, "amount_total": t.Amount,
		"currency": strings.ToLower(t.Currency), "payment_status": status, "metadata": map[string]string{"topup_id": t.ID},
	})
	payload, _ = json.Marshal(map[string]any{
		"id": "evt_test_" + t.ID + "_" + string(typ), "object": "event", "type": typ, "api_version": stripe.APIVersion,
		"created": now.Unix(), "data": map[string]json.RawMessage{"object": session},
	})
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: p.Secret, Timestamp: now})
	return payload, signed.Header
}

// RefusedAccount is the account the test provider refuses payouts to,
// as Stripe would one that cannot receive them (its test card numbers'
// way): how a refused payout is tried without a real bank.
const RefusedAccount = "acct_refused"

// Payout pays p out at once (the test provider has no bank), but to
// RefusedAccount.
func (p Test) Payout(_ context.Context, po seckill.Payout) (string, error) {
	if po.Account == RefusedAccount {
		return "", fmt.Errorf("provider: the test provider refuses payouts to %s", po.Account)
	}
	return "test_" + po.ID, nil
}
