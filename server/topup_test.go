package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill/seckill/system/servertest"
)

func walletOf(t *testing.T, st *stack, user string) int64 {
	t.Helper()
	r := call(t, st.h, "GET", "/api/wallet", nil, bearer(servertest.Token(t, user)))
	if r.Status != 200 {
		t.Fatalf("wallet: %v", r)
	}
	return num(r.Body, "balance_cents")
}

func startTopup(t *testing.T, st *stack, user string, cents int64, rid string) response {
	t.Helper()
	return call(t, st.h, "POST", "/api/wallet/topups", map[string]any{"amount_cents": cents, "request_id": rid},
		bearer(servertest.Token(t, user)))
}

// TestTopupThroughTestPage: in development the provider is a page of this
// server; paying there sends the signed webhook, which credits the wallet
// once, however often the page is paid.
func TestTopupThroughTestPage(t *testing.T) {
	st := newStack(t)
	user := "u_testpage"
	r := startTopup(t, st, user, 2500, "topup-test-1")
	if r.Status != 201 || r.Body["status"] != "pending" || !strings.Contains(r.Body["checkout_url"].(string), "/pay/test/") {
		t.Fatalf("start: %v", r)
	}
	id := r.Body["topup_id"].(string)
	if again := startTopup(t, st, user, 2500, "topup-test-1"); again.Body["topup_id"] != id {
		t.Errorf("the same request id made another top-up: %v", again)
	}
	if page := call(t, st.h, "GET", "/pay/test/"+id, nil); page.Status != 200 || !strings.Contains(page.Raw, "25.00 USD") {
		t.Fatalf("the test page: %v", page)
	}
	if walletOf(t, st, user) != 0 {
		t.Fatal("credited before paying")
	}
	for range 2 {
		if r := call(t, st.h, "POST", "/pay/test/"+id+"/pay", nil); r.Status != http.StatusSeeOther {
			t.Fatalf("pay at the test page: %v", r)
		}
	}
	if w := walletOf(t, st, user); w != 2500 {
		t.Errorf("the wallet holds %d after the top-up, want 2500", w)
	}
	if r := call(t, st.h, "GET", "/api/wallet/topups/"+id, nil, bearer(servertest.Token(t, user))); r.Body["status"] != "succeeded" {
		t.Errorf("the top-up: %v", r)
	}
	if r := call(t, st.h, "GET", "/api/wallet/topups/"+id, nil, bearer(servertest.Token(t, "u_someoneelse"))); r.Status != 404 {
		t.Errorf("another user's top-up: %v", r)
	}
	// Abandoned: it fails and credits nothing.
	r = startTopup(t, st, user, 100, "topup-test-2")
	gone := r.Body["topup_id"].(string)
	call(t, st.h, "POST", "/pay/test/"+gone+"/cancel", nil)
	if r := call(t, st.h, "GET", "/api/wallet/topups/"+gone, nil, bearer(servertest.Token(t, user))); r.Body["status"] != "failed" || walletOf(t, st, user) != 2500 {
		t.Errorf("an abandoned top-up: %v, wallet %d", r, walletOf(t, st, user))
	}
	// Bad input changes nothing.
	for _, body := range []string{`{"amount_cents":0,"request_id":"topup-bad-1"}`, `{"amount_cents":-5,"request_id":"topup-bad-2"}`,
		`{"amount_cents":1.5,"request_id":"topup-bad-3"}`, `{"amount_cents":1000001,"request_id":"topup-bad-4"}`,
		`{"Amount_cents":100,"request_id":"topup-bad-5"}`, `{"amount_cents":9223372036854775808,"request_id":"topup-bad-6"}`,
		`{"amount_cents":100,"request_id":"short"}`} {
		if r := call(t, st.h, "POST", "/api/wallet/topups", body, bearer(servertest.Token(t, user))); r.Status != 400 {
			t.Errorf("%s: %v", body, r)
		}
	}
}

// stripeStack is a server whose provider is Stripe at stripe-mock, with
// two webhook secrets (a rotation under way).
func stripeStack(t *testing.T) *stack {
	return newStack(t, "SECKILL_PAYMENT_PROVIDER=stripe", "SECKILL_STRIPE_SECRET_KEY=sk_test_seckill",
		"SECKILL_STRIPE_WEBHOOK_SECRET=whsec_new,whsec_old", "SECKILL_STRIPE_API_BASE="+servertest.StripeMock(t))
}

// sessionEvent is a checkout.session event of a top-up as Stripe sends it.
func sessionEvent(typ stripe.EventType, topup string, amount int64, currency, status string) []byte {
	obj, _ := json.Marshal(map[string]any{"id": "cs_test_x", "object": "checkout.session", "client_reference_id": topup,
		"amount_total": amount, "currency": currency, "payment_status": status})
	ev, _ := json.Marshal(map[string]any{"id": "evt_" + topup + string(typ), "object": "event", "type": typ,
		"api_version": stripe.APIVersion, "data": map[string]json.RawMessage{"object": obj}})
	return ev
}

func deliver(t *testing.T, st *stack, payload []byte, header string) response {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/payments/webhook", strings.NewReader(string(payload)))
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set("Stripe-Signature", header)
	}
	rec := httptest.NewRecorder()
	st.h.ServeHTTP(rec, req)
	res := response{Status: rec.Code, Raw: rec.Body.String()}
	_ = json.Unmarshal(rec.Body.Bytes(), &res.Body)
	return res
}

func sign(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

// TestTopupThroughStripe: a top-up opens a Checkout Session at Stripe
// (stripe-mock), and only the provider's signed webhook credits it: once
// whatever the deliveries, with either secret of a rotation; a signature
// wrong, missing, too old or too new, an amount or a currency that
// disagrees are refused with a 4xx and credit nothing.
func TestTopupThroughStripe(t *testing.T) {
	st := stripeStack(t)
	user := "u_stripe"
	r := startTopup(t, st, user, 4200, "topup-stripe-1")
	if r.Status != 201 || r.Body["checkout_url"] == "" {
		t.Fatalf("start: %v", r)
	}
	id := r.Body["topup_id"].(string)
	now := time.Now()
	paid := sessionEvent(stripe.EventTypeCheckoutSessionCompleted, id, 4200, "usd", "paid")
	for _, c := range []struct {
		name    string
		payload []byte
		header  string
		status  int
		code    string
	}{
		{"another secret", paid, sign(paid, "whsec_forged", now), 400, "invalid_signature"},
		{"no signature", paid, "", 400, "invalid_signature"},
		{"ten minutes old", paid, sign(paid, "whsec_new", now.Add(-10*time.Minute)), 400, "invalid_signature"},
		{"ten minutes ahead", paid, sign(paid, "whsec_new", now.Add(10*time.Minute)), 400, "invalid_signature"},
		{"another amount", sessionEvent(stripe.EventTypeCheckoutSessionCompleted, id, 4300, "usd", "paid"),
			sign(sessionEvent(stripe.EventTypeCheckoutSessionCompleted, id, 4300, "usd", "paid"), "whsec_new", now), 400, "invalid_request"},
		{"another currency", sessionEvent(stripe.EventTypeCheckoutSessionCompleted, id, 4200, "eur", "paid"),
			sign(sessionEvent(stripe.EventTypeCheckoutSessionCompleted, id, 4200, "eur", "paid"), "whsec_new", now), 400, "invalid_request"},
		{"a body not its signature's", []byte(strings.Replace(string(paid), "4200", "9999", 1)), sign(paid, "whsec_new", now), 400, "invalid_signature"},
	} {
		if r := deliver(t, st, c.payload, c.header); r.Status != c.status || r.code() != c.code {
			t.Errorf("%s: %v, want %d %s", c.name, r, c.status, c.code)
		}
	}
	if w := walletOf(t, st, user); w != 0 {
		t.Fatalf("refused webhooks credited %d", w)
	}
	// Signed with the old secret of the rotation; delivered three times,
	// the same signature replayed within the tolerance.
	header := sign(paid, "whsec_old", now)
	for range 3 {
		if r := deliver(t, st, paid, header); r.Status != 200 {
			t.Fatalf("the paid webhook: %v", r)
		}
	}
	if w := walletOf(t, st, user); w != 4200 {
		t.Errorf("the wallet holds %d, want 4200 once", w)
	}
	if r := call(t, st.h, "GET", "/api/wallet/topups/"+id, nil, bearer(servertest.Token(t, user))); r.Body["status"] != "succeeded" {
		t.Errorf("the top-up: %v", r)
	}
	// An event of another kind, or of a top-up this shop does not have, is
	// acknowledged and changes nothing.
	other := sessionEvent(stripe.EventTypeCheckoutSessionCompleted, "tu_unknown", 4200, "usd", "paid")
	if r := deliver(t, st, other, sign(other, "whsec_new", now)); r.Status != 200 || walletOf(t, st, user) != 4200 {
		t.Errorf("an unknown top-up's event: %v", r)
	}
	// Each delivery is counted by its answer's code.
	m := call(t, st.h, "GET", "/metrics", nil, admin()).Raw
	for _, want := range []string{`seckill_webhooks_total{outcome="invalid_signature"} 5`, `seckill_webhooks_total{outcome="invalid_request"} 2`,
		`seckill_webhooks_total{outcome="ok"} 4`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "seckill_webhooks_total"))
		}
	}
}
