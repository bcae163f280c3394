// Package provider is the payment provider: where shoppers pay their
// top-ups, and whose signed webhooks say that they paid. Stripe in
// production, through its Go SDK (stripe-go): a top-up is a Checkout
// Session, its webhook checked with the SDK's verification (the
// signature's HMAC over the timestamp and the raw body, any of several
// secrets during a rotation, a timestamp within Tolerance either way).
// In development and embedded mode Test stands in for it: a page of this
// server is the checkout, and paying there signs the same webhook with
// the same scheme, so one code path credits every top-up.
package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill"
)

// Tolerance is how far a webhook's timestamp may be from now, either
// way: an older one is a replay, a newer one a forgery or a broken clock.
const Tolerance = 5 * time.Minute

// ErrSignature refuses a webhook whose signature is missing, wrong, too
// old or too new; nothing it says is acted on.
var ErrSignature = seckill.ErrInvalidSignature

// Verifier checks the provider's webhooks with its signing secrets (the
// newest first; several while a secret is rotated).
type Verifier struct {
	Secrets []string
}

// Event checks a webhook's signature (header: Stripe-Signature) over its
// raw payload at now, and reads what it says of a top-up. An event about
// anything else is returned empty (no top-up id: nothing to do).
func (v Verifier) Event(payload []byte, header string, now time.Time) (seckill.PaymentEvent, error) {
	if err := fresh(header, now); err != nil {
		return seckill.PaymentEvent{}, err
	}
	var ev stripe.Event
	err := error(webhook.ErrNoValidSignature)
	for _, s := range v.Secrets {
		// The SDK refuses an old timestamp; fresh has checked both ways.
		ev, err = webhook.ConstructEventWithOptions(payload, header, s, webhook.ConstructEventOptions{
			IgnoreTolerance: true, IgnoreAPIVersionMismatch: true})
		if !errors.Is(err, webhook.ErrNoValidSignature) {
			break
		}
	}
	switch {
	case errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader):
		return seckill.PaymentEvent{}, fmt.Errorf("provider: %w: %w", ErrSignature, err)
	case err != nil:
		return seckill.PaymentEvent{}, seckill.Errorf(seckill.CodeInvalid, "The webhook's body is not an event.")
	}
	return read(ev)
}

// fresh checks the signature header's timestamp against now, within
// Tolerance either way.
func fresh(header string, now time.Time) error {
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			var unix int64
			if _, err := fmt.Sscan(v, &unix); err != nil {
				break
			}
			if d := now.Sub(time.Unix(unix, 0)); d > Tolerance || d < -Tolerance {
				return fmt.Errorf("provider: %w: signed %s from now", ErrSignature, d.Round(time.Second))
			}
			return nil
		}
	}
	return fmt.Errorf("provider: %w: no timestamp", ErrSignature)
}

// read turns a checked event into what it says of a top-up: a Checkout
// Session completed and paid (or paid later), or expired or failed; a
// PaymentIntent that succeeded or failed. The top-up is named by the
// session's client_reference_id or the metadata's topup_id.
func read(ev stripe.Event) (seckill.PaymentEvent, error) {
	e := seckill.PaymentEvent{ID: ev.ID}
	bad := seckill.Errorf(seckill.CodeInvalid, "The webhook's %s object cannot be read.", ev.Type)
	switch ev.Type {
	case stripe.EventTypeCheckoutSessionCompleted, stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded,
		stripe.EventTypeCheckoutSessionAsyncPaymentFailed, stripe.EventTypeCheckoutSessionExpired:
		var cs stripe.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &cs); err != nil {
			return e, bad
		}
		e.TopupID, e.Ref, e.Amount, e.Currency = cs.ClientReferenceID, cs.ID, cs.AmountTotal, string(cs.Currency)
		if e.TopupID == "" {
			e.TopupID = cs.Metadata["topup_id"]
		}
		e.Succeeded = ev.Type != stripe.EventTypeCheckoutSessionAsyncPaymentFailed && ev.Type != stripe.EventTypeCheckoutSessionExpired &&
			cs.PaymentStatus == stripe.CheckoutSessionPaymentStatusPaid
		e.Failed = ev.Type == stripe.EventTypeCheckoutSessionAsyncPaymentFailed || ev.Type == stripe.EventTypeCheckoutSessionExpired
	case stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentPaymentFailed:
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return e, bad
		}
		e.TopupID, e.Ref, e.Amount, e.Currency = pi.Metadata["topup_id"], pi.ID, pi.AmountReceived, string(pi.Currency)
		e.Succeeded = ev.Type == stripe.EventTypePaymentIntentSucceeded
		e.Failed = !e.Succeeded
	}
	return e, nil
}
