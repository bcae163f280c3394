package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/provider"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

// earn has user buy and pay qty units of 1000 cents on a new sale of the
// merchant (its cookie), and waits for its account to hold want: what a
// merchant has to pay out.
func earn(t *testing.T, st *stack, merchant, user string, qty, want int64) {
	t.Helper()
	r := call(t, st.h, "POST", "/admin/api/sales", map[string]any{"name": "Earning", "item": "Thing", "price_cents": 1000,
		"total": 10, "per_user_limit": 5, "starts_at": time.Now().Add(-time.Minute), "ends_at": time.Now().Add(time.Hour)}, merchant)
	if r.Status != 201 {
		t.Fatal(r)
	}
	st.Fund(t, user, qty*1000)
	buy := call(t, st.h, "POST", buyPath(num(r.Body, "id")), buyBody(qty, "earn-"+user), bearer(servertest.Token(t, user)))
	order, _ := buy.Body["order_id"].(string)
	if p := call(t, st.h, "POST", "/api/orders/"+order+"/pay", nil, bearer(servertest.Token(t, user))); p.Status != 200 {
		t.Fatalf("pay: %v (buy %v)", p, buy)
	}
	servertest.WaitFor(t, 20*time.Second, "the merchant credited", func() (bool, string) {
		b := accountOf(t, st, merchant)
		return b == want, fmt.Sprint(b)
	})
}

func accountOf(t *testing.T, st *stack, hdr ...string) int64 {
	t.Helper()
	r := call(t, st.h, "GET", "/admin/api/balance", nil, hdr...)
	if r.Status != 200 {
		t.Fatalf("balance: %v", r)
	}
	return num(r.Body, "balance_cents")
}

func payout(t *testing.T, st *stack, cents int64, rid, code string, hdr ...string) response {
	t.Helper()
	body := map[string]any{"amount_cents": cents, "request_id": rid}
	if code != "" {
		body["totp"] = code
	}
	return call(t, st.h, "POST", "/admin/api/payouts", body, hdr...)
}

// TestPayout: a merchant pays out what its account holds, once per
// request id (a retry answers the same payout, another amount is
// refused); more than it holds is 402 and changes nothing; the operator
// may not; the same payout asked at once is one payout; twenty payouts at
// once from one account never take it below 0; a payout the provider refuses ends failed and its money comes back;
// each is in the audit log and the statement.
func TestPayout(t *testing.T) {
	st := newStack(t, "SECKILL_PLATFORM_FEE_BPS=250")
	broker := st.StartPipeline(t)
	mid, merchant := merchantLogin(t, st, "payouts@shop.example")
	earn(t, st, merchant, "u_payouts", 2, 1950) // 2000 less the 2.5% fee

	if r := payout(t, st, 100, "payout-operator", "", admin()); r.Status != 403 {
		t.Errorf("the operator's payout: %v", r)
	}
	if r := payout(t, st, 1951, "payout-too-much", "", merchant); r.Status != 402 || r.code() != "insufficient_funds" {
		t.Errorf("more than the account holds: %v", r)
	}
	for name, body := range map[string]map[string]any{
		"no amount":          {"request_id": "payout-bad-1"},
		"a negative amount":  {"amount_cents": -5, "request_id": "payout-bad-2"},
		"a fraction":         {"amount_cents": 1.5, "request_id": "payout-bad-3"},
		"a short request id": {"amount_cents": 5, "request_id": "x"},
		"a key in capitals":  {"Amount_Cents": 5, "request_id": "payout-bad-4"},
	} {
		if r := call(t, st.h, "POST", "/admin/api/payouts", body, merchant); r.Status != 400 {
			t.Errorf("%s: %v", name, r)
		}
	}
	if b := accountOf(t, st, merchant); b != 1950 {
		t.Fatalf("refused payouts moved money: %d", b)
	}

	r := payout(t, st, 1000, "payout-first", "", merchant)
	if r.Status != 201 || r.Body["status"] != "paid" || r.Body["provider_ref"] == "" {
		t.Fatalf("payout: %v", r)
	}
	id := r.Body["payout_id"]
	if again := payout(t, st, 1000, "payout-first", "", merchant); again.Status != 201 || again.Body["payout_id"] != id {
		t.Errorf("a retry: %v, want 201 and %v", again, id)
	}
	if other := payout(t, st, 900, "payout-first", "", merchant); other.Status != 400 {
		t.Errorf("the same request id for another amount: %v", other)
	}
	if b := accountOf(t, st, merchant); b != 950 {
		t.Fatalf("after paying out 1000 of 1950: %d", b)
	}

	// The same payout asked eight times at once: one payout, paid once.
	var wg sync.WaitGroup
	twins := make([]response, 8)
	for i := range twins {
		wg.Go(func() { twins[i] = payout(t, st, 100, "payout-twin", "", merchant) })
	}
	wg.Wait()
	for _, r := range twins {
		if r.Status != 201 || r.Body["payout_id"] != twins[0].Body["payout_id"] {
			t.Errorf("the same payout at once: %v and %v", r, twins[0])
		}
	}
	if b := accountOf(t, st, merchant); b != 850 {
		t.Fatalf("after the same payout of 100 eight times at once: %d, want 850", b)
	}

	// Twenty payouts of 100 at once from 850: eight are paid, twelve
	// refused, the account never below 0.
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() { statuses[i] = payout(t, st, 100, fmt.Sprintf("payout-race-%02d", i), "", merchant).Status })
	}
	wg.Wait()
	paid, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case 201:
			paid++
		case 402:
			refused++
		}
	}
	if paid != 8 || refused != 12 {
		t.Errorf("twenty payouts of 100 from 850: %d paid, %d refused (%v)", paid, refused, statuses)
	}
	if b := accountOf(t, st, merchant); b != 50 {
		t.Errorf("after the race: %d, want 50", b)
	}

	// The provider refuses: the payout fails, the money comes back.
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/payout-account", mid),
		map[string]any{"account": provider.RefusedAccount}, admin()); r.Status != 200 || r.Body["payout_account"] != provider.RefusedAccount {
		t.Fatalf("set the payout account: %v", r)
	}
	if r := payout(t, st, 50, "payout-refused", "", merchant); r.Status != 201 || r.Body["status"] != "failed" {
		t.Errorf("a refused payout: %v", r)
	}
	servertest.WaitFor(t, 20*time.Second, "the refused payout's money back", func() (bool, string) {
		b := accountOf(t, st, merchant)
		return b == 50, fmt.Sprint(b)
	})
	if r := payout(t, st, 50, "payout-refused", "", merchant); r.Status != 201 || r.Body["status"] != "failed" {
		t.Errorf("a refused payout retried: %v", r)
	}
	if b := accountOf(t, st, merchant); b != 50 {
		t.Errorf("a retry of a refused payout gave its money back twice: %d", b)
	}

	// The statement: the payouts and the refused one's reversal; the
	// audit log: each payout asked for.
	servertest.WaitFor(t, 20*time.Second, "11 payouts and 1 void in the statement", func() (bool, string) {
		kinds := map[string]int{}
		for _, l := range call(t, st.h, "GET", "/admin/api/transfers?limit=200", nil, merchant).Body["transfers"].([]any) {
			kinds[l.(map[string]any)["kind"].(string)]++
		}
		return kinds["payout"] == 11 && kinds["void"] == 1, fmt.Sprint(kinds)
	})
	asked := 0
	for _, e := range call(t, st.h, "GET", "/admin/api/audit?limit=200", nil, merchant).Body["entries"].([]any) {
		if e.(map[string]any)["action"] == "payout.create" {
			asked++
		}
	}
	if asked != 11 {
		t.Errorf("%d audit rows of payouts, want 11", asked)
	}
	// Redis and the ledger agree to the cent, every account adding up to 0.
	sys := system.New(st.Config, system.Conns{Redis: st.Redis, DB: st.DB, Bus: broker}, nil)
	fr := worker.NewFundsReconciler(sys.Funds, st.Ledger, broker, nil)
	servertest.WaitFor(t, 30*time.Second, "the funds reconciled", func() (bool, string) {
		rep, err := fr.Check(t.Context())
		return err == nil && !rep.InFlight && len(rep.Drift) == 0 && rep.RedisSum == 0 && rep.LedgerSum == 0, fmt.Sprintf("%+v %v", rep, err)
	})
}

// TestPayoutSecondFactor: a merchant enrolled in a second factor gives
// its current code to pay out, each code once.
func TestPayoutSecondFactor(t *testing.T) {
	st := newStack(t)
	st.StartPipeline(t)
	_, merchant := merchantLogin(t, st, "payouts2fa@shop.example")
	earn(t, st, merchant, "u_payouts2fa", 1, 1000)
	secret, _ := call(t, st.h, "POST", "/admin/api/me/totp", nil, merchant).Body["secret"].(string)
	code, _ := totp.GenerateCode(secret, time.Now())
	if r := call(t, st.h, "POST", "/admin/api/me/totp/confirm", map[string]any{"code": code}, merchant); r.Status != 200 {
		t.Fatalf("confirm: %v", r)
	}
	if r := payout(t, st, 100, "payout-2fa-1", "", merchant); r.Status != 403 {
		t.Errorf("no code: %v", r)
	}
	if r := payout(t, st, 100, "payout-2fa-1", code, merchant); r.Status != 403 {
		t.Errorf("the code used to confirm: %v", r)
	}
	next, _ := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	if r := payout(t, st, 100, "payout-2fa-1", next, merchant); r.Status != 201 {
		t.Errorf("a fresh code: %v", r)
	}
	if r := payout(t, st, 100, "payout-2fa-2", next, merchant); r.Status != 403 {
		t.Errorf("the same code twice: %v", r)
	}
	if b := accountOf(t, st, merchant); b != 900 {
		t.Errorf("after one payout of 100: %d", b)
	}
}

// TestPayoutThroughStripe: with Stripe, a merchant without a connected
// account is refused before any money moves; with one, its payout is a
// Transfer to it (stripe-mock) and ends paid.
func TestPayoutThroughStripe(t *testing.T) {
	st := stripeStack(t)
	st.StartPipeline(t)
	mid, merchant := merchantLogin(t, st, "stripepayouts@shop.example")
	earn(t, st, merchant, "u_stripepayouts", 1, 1000)
	if r := payout(t, st, 400, "payout-stripe-1", "", merchant); r.Status != 400 {
		t.Errorf("no connected account: %v", r)
	}
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/payout-account", mid),
		map[string]any{"account": "acct with spaces"}, admin()); r.Status != 400 {
		t.Errorf("a malformed account: %v", r)
	}
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/payout-account", mid),
		map[string]any{"account": "acct_1Seckill"}, admin()); r.Status != 200 {
		t.Fatalf("set the account: %v", r)
	}
	r := payout(t, st, 400, "payout-stripe-1", "", merchant)
	if r.Status != 201 || r.Body["status"] != "paid" {
		t.Fatalf("payout: %v", r)
	}
	if ref, _ := r.Body["provider_ref"].(string); len(ref) < 3 || ref[:3] != "tr_" {
		t.Errorf("the provider's reference %q is no Stripe transfer", ref)
	}
	if b := accountOf(t, st, merchant); b != 600 {
		t.Errorf("after paying out 400 of 1000: %d", b)
	}
}

// TestPayoutProviderDown: with Stripe out of reach a payout answers 503
// and stays pending, its money held; the same request id sends it once
// Stripe is back, and the worker's sweep sends one nobody retried.
func TestPayoutProviderDown(t *testing.T) {
	mock := servertest.StripeMock(t)
	px := servertest.Proxy(t, "stripe", strings.TrimPrefix(mock, "http://"))
	st := newStack(t, "SECKILL_PAYMENT_PROVIDER=stripe", "SECKILL_STRIPE_SECRET_KEY=sk_test_seckill",
		"SECKILL_STRIPE_WEBHOOK_SECRET=whsec_new", "SECKILL_STRIPE_API_BASE=http://"+px.Listen)
	broker := st.StartPipeline(t)
	mid, merchant := merchantLogin(t, st, "providerdown@shop.example")
	earn(t, st, merchant, "u_providerdown", 1, 1000)
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/payout-account", mid),
		map[string]any{"account": "acct_1Down"}, admin()); r.Status != 200 {
		t.Fatalf("set the account: %v", r)
	}
	px.Stop()
	for _, rid := range []string{"payout-down-1", "payout-down-2"} {
		if r := payout(t, st, 300, rid, "", merchant); r.Status != 503 {
			t.Errorf("%s with Stripe down: %v", rid, r)
		}
	}
	if b := accountOf(t, st, merchant); b != 400 {
		t.Fatalf("two payouts of 300 pending: the account holds %d, want 400", b)
	}
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	if r := payout(t, st, 300, "payout-down-1", "", merchant); r.Status != 201 || r.Body["status"] != "paid" {
		t.Errorf("the retry with Stripe back: %v", r)
	}
	sys := system.New(st.Config, system.Conns{Redis: st.Redis, DB: st.DB, Bus: broker}, nil)
	if n, err := sys.SettlePayouts(t.Context(), time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Errorf("the sweep finished %d payouts (%v), want 1", n, err)
	}
	p, err := st.Ledger.Payout(t.Context(), seckill.PayoutIDOf(mid, "payout-down-2"))
	if err != nil || p.Status != seckill.PayoutPaid || !strings.HasPrefix(p.ProviderRef, "tr_") {
		t.Errorf("the swept payout: %+v (%v)", p, err)
	}
	if b := accountOf(t, st, merchant); b != 400 {
		t.Errorf("after both paid: the account holds %d, want 400", b)
	}
}
