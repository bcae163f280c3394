package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/system/servertest"
)

// hammer sends n concurrent buy requests for one sale from users user-0 ..
// user-(users-1), qty 1 or 2 at random, through h, while a sampler watches
// the stock hash. It checks the invariants: exactly total units sold, no
// user over limit, available never negative, one outbox event per
// accepted order with matching quantities.
func hammer(t *testing.T, st *stack, h http.Handler, n, users int, total, limit int64) {
	t.Helper()
	ctx := context.Background()
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: total, Limit: limit, PriceCents: 100})
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = servertest.Token(t, fmt.Sprintf("user-%d", i))
	}

	stop := make(chan struct{})
	var sampled, negative atomic.Int64
	sampler := sync.WaitGroup{}
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := st.Redis.HMGet(ctx, st.Keys.Part(inventory.First(sale.ID).Tag).Stock(), "available", "sold", "total").Result()
			if err != nil {
				t.Error(err)
				return
			}
			a, _ := strconv.ParseInt(v[0].(string), 10, 64)
			s, _ := strconv.ParseInt(v[1].(string), 10, 64)
			tot, _ := strconv.ParseInt(v[2].(string), 10, 64)
			if a < 0 || a+s != tot {
				negative.Add(1)
			}
			sampled.Add(1)
		}
	})

	type accepted struct {
		user, order string
		qty         int64
	}
	var (
		mu     sync.Mutex
		oks    []accepted
		codes  = map[string]int{}
		start  = make(chan struct{})
		wg     sync.WaitGroup
		byUser = map[string]int64{}
	)
	for i := range n {
		u := i % users
		qty := int64(1 + rand.IntN(2))
		wg.Go(func() {
			<-start
			r := call(t, h, "POST", buyPath(sale.ID), buyBody(qty, fmt.Sprintf("req-%08d", i)), bearer(tokens[u]))
			mu.Lock()
			defer mu.Unlock()
			if r.Status == http.StatusOK {
				oks = append(oks, accepted{fmt.Sprintf("user-%d", u), r.Body["order_id"].(string), num(r.Body, "qty")})
				byUser[fmt.Sprintf("user-%d", u)] += num(r.Body, "qty")
			}
			codes[r.code()]++
		})
	}
	close(start)
	wg.Wait()
	close(stop)
	sampler.Wait()

	var unitsOK int64
	for _, a := range oks {
		unitsOK += a.qty
	}
	if unitsOK != total {
		t.Errorf("200 answers bought %d units, want exactly %d (codes %v)", unitsOK, total, codes)
	}
	if codes[""]+codes["sold_out"]+codes["limit_exceeded"] != n {
		t.Errorf("unexpected answers: %v", codes)
	}
	for u, q := range byUser {
		if q > limit {
			t.Errorf("%s holds %d units, limit %d", u, q, limit)
		}
	}
	stock, err := st.Inventory.Stock(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stock.Sold != total || stock.Available != 0 {
		t.Errorf("stock = %+v, want %d sold and none left", stock, total)
	}
	buyers, _ := st.Inventory.Buyers(ctx, sale.ID)
	for u, q := range buyers {
		if q > limit || q != byUser[u] {
			t.Errorf("redis says %s holds %d, answers say %d (limit %d)", u, q, byUser[u], limit)
		}
	}
	if negative.Load() > 0 || sampled.Load() == 0 {
		t.Errorf("%d of %d samples broke available >= 0 and available+sold = total", negative.Load(), sampled.Load())
	}
	t.Logf("%d requests: %v; %d stock samples taken during the run", n, codes, sampled.Load())

	// The outbox holds exactly one event per accepted order.
	entries, err := st.Inventory.Outbox(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]accepted{}
	for _, a := range oks {
		want[a.order] = a
	}
	seen := map[string]bool{}
	for _, e := range entries {
		evs, err := inventory.DecodeOutbox(e.Values)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range evs {
			id := got.OrderID
			a, ok := want[id]
			if !ok || seen[id] {
				t.Errorf("outbox event for order %s: accepted %v, seen before %v", id, ok, seen[id])
				continue
			}
			seen[id] = true
			if got.UserID != a.user || got.Qty != a.qty {
				t.Errorf("event %+v does not match answer %+v", got, a)
			}
		}
	}
	if len(seen) != len(oks) {
		t.Errorf("outbox holds events for %d of %d accepted orders", len(seen), len(oks))
	}
}

// coalescing are the buy path's configurations: one Lua call per request,
// and the batcher with caps 1 and 256.
var coalescing = map[string][]string{
	"direct":  {"SECKILL_BATCH_ENABLED=false"},
	"cap-1":   {"SECKILL_BATCH_ENABLED=true", "SECKILL_BATCH_MAX=1"},
	"cap-256": {"SECKILL_BATCH_ENABLED=true", "SECKILL_BATCH_MAX=256"},
}

func TestBuyConcurrencyInvariants(t *testing.T) {
	for name, env := range coalescing {
		t.Run(name, func(t *testing.T) {
			st := newStack(t, env...)
			hammer(t, st, st.h, 5000, 1000, 500, 2)
			calls, reqs := batchStats(t, st)
			t.Logf("%d batcher calls for %d requests", calls, reqs)
			if name == "cap-256" && reqs <= calls {
				t.Errorf("5000 concurrent requests never coalesced: %d calls for %d requests", calls, reqs)
			}
			if name == "cap-1" && reqs != calls {
				t.Errorf("cap 1: %d calls for %d requests", calls, reqs)
			}
		})
	}
}

// batchStats reads the batch-size histogram off /metrics: Lua calls made
// through the batcher and requests they decided.
func batchStats(t *testing.T, st *stack) (calls, reqs int64) {
	t.Helper()
	r := call(t, st.h, "GET", "/metrics", nil, admin())
	for _, line := range strings.Split(r.Raw, "\n") {
		var v float64
		if _, err := fmt.Sscanf(line, "seckill_buy_batch_size_count %g", &v); err == nil {
			calls = int64(v)
		}
		if _, err := fmt.Sscanf(line, "seckill_buy_batch_size_sum %g", &v); err == nil {
			reqs = int64(v)
		}
	}
	return calls, reqs
}

func TestBuyIdempotentUnderConcurrency(t *testing.T) {
	for name, env := range coalescing {
		t.Run(name, func(t *testing.T) { idempotentUnderConcurrency(t, env) })
	}
}

func idempotentUnderConcurrency(t *testing.T, env []string) {
	st := newStack(t, env...)
	ctx := context.Background()
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 5})
	tok := servertest.Token(t, "retrier")
	const n = 50
	answers := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = call(t, st.h, "POST", buyPath(sale.ID), buyBody(2, "same-request-id"), bearer(tok))
		})
	}
	close(start)
	wg.Wait()
	for i, a := range answers {
		if a.Status != http.StatusOK || a.Raw != answers[0].Raw {
			t.Errorf("answer %d = %v, want the same 200 as answer 0 (%v)", i, a, answers[0])
		}
	}
	stock, _ := st.Inventory.Stock(ctx, sale.ID)
	if stock.Sold != 2 || stock.Available != 8 {
		t.Errorf("stock = %+v, want one deduction of 2", stock)
	}
	if n := st.Redis.XLen(ctx, st.Keys.Part(inventory.First(sale.ID).Tag).Outbox()).Val(); n != 1 {
		t.Errorf("outbox holds %d events, want 1", n)
	}
}

// snapshot is everything Redis holds about a sale.
func snapshot(t *testing.T, st *stack, sale int64) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	keys := st.Keys.Part(inventory.First(sale).Tag)
	for _, k := range []string{keys.Stock(), keys.Buyers(), keys.Reqs(), keys.Orders()} {
		m, err := st.Redis.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%v\n", k, m)
	}
	fmt.Fprintf(&b, "outbox=%d\n", st.Redis.XLen(ctx, keys.Outbox()).Val())
	return b.String()
}

func TestBuyRefusals(t *testing.T) {
	st := newStack(t)
	now := time.Now()
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 2})
	early := servertest.MustSale(t, st.srv, servertest.SaleSpec{Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)})
	over := servertest.MustSale(t, st.srv, servertest.SaleSpec{Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)})
	paused := servertest.MustSale(t, st.srv, servertest.SaleSpec{})
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/sales/%d/pause", paused.ID), nil, admin()); r.Status != 200 {
		t.Fatalf("pause: %v", r)
	}
	// One accepted buy first, so the sale has state that must not move.
	tok := servertest.Token(t, "shopper")
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "first-buy"), bearer(tok)); r.Status != 200 {
		t.Fatalf("first buy: %v", r)
	}
	before := snapshot(t, st, sale.ID)

	expired, _, _ := sessions.MintToken([]byte(servertest.JWTSecret), "shopper", "s", -time.Minute, now)
	forged, _, _ := sessions.MintToken([]byte("some other secret entirely!!!!!!"), "shopper", "s", time.Hour, now)
	none := servertest.Token(t, "x")[:10] + "garbage"
	path := buyPath(sale.ID)
	big := `{"qty":1,"request_id":"big-body-1","pad":"` + strings.Repeat("x", 100<<10) + `"}`
	auth := bearer(tok)

	tests := []struct {
		name    string
		path    string
		body    any
		headers []string
		status  int
		code    string
	}{
		{"malformed JSON", path, `{"qty":1,`, []string{auth}, 400, "invalid_request"},
		{"not an object", path, `[1,2]`, []string{auth}, 400, "invalid_request"},
		{"empty body", path, ``, []string{auth}, 400, "invalid_request"},
		{"two objects", path, `{"qty":1,"request_id":"abcdefgh"}{}`, []string{auth}, 400, "invalid_request"},
		{"unknown field", path, `{"qty":1,"request_id":"abcdefgh","price":0}`, []string{auth}, 400, "invalid_request"},
		{"qty 0", path, buyBody(0, "qty-zero-1"), []string{auth}, 400, "invalid_request"},
		{"qty -1", path, buyBody(-1, "qty-neg-01"), []string{auth}, 400, "invalid_request"},
		{"qty missing", path, `{"request_id":"no-qty-001"}`, []string{auth}, 400, "invalid_request"},
		{"qty string", path, `{"qty":"1","request_id":"qty-str-01"}`, []string{auth}, 400, "invalid_request"},
		{"qty fraction", path, `{"qty":1.5,"request_id":"qty-frac-1"}`, []string{auth}, 400, "invalid_request"},
		{"qty 10^12", path, buyBody(1_000_000_000_000, "qty-huge-1"), []string{auth}, 409, "limit_exceeded"},
		{"qty 10^30", path, `{"qty":1000000000000000000000000000000,"request_id":"qty-huge-2"}`, []string{auth}, 400, "invalid_request"},
		{"request_id missing", path, `{"qty":1}`, []string{auth}, 400, "invalid_request"},
		{"request_id too short", path, buyBody(1, "short"), []string{auth}, 400, "invalid_request"},
		{"request_id too long", path, buyBody(1, strings.Repeat("a", 65)), []string{auth}, 400, "invalid_request"},
		{"request_id bad characters", path, buyBody(1, "bad id with spaces"), []string{auth}, 400, "invalid_request"},
		{"request_id with separator", path, buyBody(1, "abc|defgh"), []string{auth}, 400, "invalid_request"},
		{"bad sale id", "/api/sales/abc/buy", buyBody(1, "bad-sale-1"), []string{auth}, 400, "invalid_request"},
		{"negative sale id", "/api/sales/-4/buy", buyBody(1, "bad-sale-2"), []string{auth}, 400, "invalid_request"},
		{"no token", path, buyBody(1, "no-token-1"), nil, 401, "unauthenticated"},
		{"not bearer", path, buyBody(1, "no-token-2"), []string{"Authorization: Basic Zm9vOmJhcg=="}, 401, "unauthenticated"},
		{"malformed token", path, buyBody(1, "bad-token-1"), []string{bearer(none)}, 401, "unauthenticated"},
		{"forged token", path, buyBody(1, "forged-tok-1"), []string{bearer(forged)}, 401, "unauthenticated"},
		{"expired token", path, buyBody(1, "expired-tok-1"), []string{bearer(expired)}, 401, "unauthenticated"},
		{"100 KiB body", path, big, []string{auth}, 413, "body_too_large"},
		{"unknown sale", buyPath(987654), buyBody(1, "unknown-sale"), []string{auth}, 404, "sale_not_found"},
		{"not started", buyPath(early.ID), buyBody(1, "too-early-1"), []string{auth}, 409, "not_started"},
		{"ended", buyPath(over.ID), buyBody(1, "too-late-01"), []string{auth}, 409, "ended"},
		{"paused", buyPath(paused.ID), buyBody(1, "paused-0001"), []string{auth}, 409, "paused"},
		{"unknown route", "/api/nothing-here", nil, nil, 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, st.h, "POST", tc.path, tc.body, tc.headers...)
			if r.Status != tc.status || r.code() != tc.code {
				t.Fatalf("got %v, want %d %s", r, tc.status, tc.code)
			}
			if msg, _ := r.Body["error"].(map[string]any)["message"].(string); msg == "" {
				t.Errorf("no message in %v", r)
			}
		})
	}
	// A 413 arrives also when the body is streamed without a length.
	t.Run("chunked 100 KiB body", func(t *testing.T) {
		ts := servertest.HTTP(t, st.h)
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(big))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 413 {
			t.Errorf("status %d, want 413", res.StatusCode)
		}
	})
	if after := snapshot(t, st, sale.ID); after != before {
		t.Errorf("refused requests changed the sale:\nbefore %s\nafter  %s", before, after)
	}
}

func TestRateLimits(t *testing.T) {
	tests := []struct {
		name     string
		override string
		// requests from (user, ip) pairs; the last one must be refused.
		from [][2]string
	}{
		{"per user", "SECKILL_RATE_PER_USER=2", [][2]string{{"a", "192.0.2.1"}, {"a", "192.0.2.2"}, {"a", "192.0.2.3"}}},
		{"per IP", "SECKILL_RATE_PER_IP=2", [][2]string{{"a", "192.0.2.1"}, {"b", "192.0.2.1"}, {"c", "192.0.2.1"}}},
		{"global", "SECKILL_RATE_GLOBAL=2", [][2]string{{"a", "192.0.2.1"}, {"b", "192.0.2.2"}, {"c", "192.0.2.3"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, tc.override)
			sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 100})
			var last response
			for i, f := range tc.from {
				last = callFrom(t, st.h, f[1], buyPath(sale.ID), buyBody(1, fmt.Sprintf("limit-%04d", i)),
					bearer(servertest.Token(t, f[0])))
				if i < len(tc.from)-1 && last.Status != 200 {
					t.Fatalf("request %d refused: %v", i, last)
				}
			}
			if last.Status != 429 || last.code() != "rate_limited" {
				t.Fatalf("last request = %v, want 429 rate_limited", last)
			}
			if ra, err := strconv.Atoi(last.Header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After = %q, want whole seconds >= 1", last.Header.Get("Retry-After"))
			}
		})
	}

	// X-Forwarded-For from an untrusted client does not open a new bucket.
	t.Run("forwarded-for ignored", func(t *testing.T) {
		st := newStack(t, "SECKILL_RATE_PER_IP=1")
		sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 100})
		tok := bearer(servertest.Token(t, "xff"))
		first := callFrom(t, st.h, "192.0.2.9", buyPath(sale.ID), buyBody(1, "xff-000001"), tok)
		second := callFrom(t, st.h, "192.0.2.9", buyPath(sale.ID), buyBody(1, "xff-000002"), tok, "X-Forwarded-For: 198.51.100.7")
		if first.Status != 200 || second.Status != 429 {
			t.Errorf("got %v then %v, want 200 then 429", first, second)
		}
	})
}

func callFrom(t *testing.T, h http.Handler, ip, path string, body any, headers ...string) response {
	t.Helper()
	return call(t, ipHandler{h, ip}, "POST", path, body, headers...)
}

// ipHandler makes requests appear to come from ip.
type ipHandler struct {
	h  http.Handler
	ip string
}

func (x ipHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.RemoteAddr = x.ip + ":4321"
	x.h.ServeHTTP(w, r)
}

func TestSessionCookieAndCSRF(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 5})
	r := call(t, st.h, "POST", "/api/session", map[string]any{"name": "alice"})
	if r.Status != 200 || r.Body["token"] == "" || r.Body["user_id"] == "" || r.Body["name"] != "alice" {
		t.Fatalf("session: %v", r)
	}
	cookie := r.Header.Get("Set-Cookie")
	if !strings.Contains(cookie, "sk_session=") || !strings.Contains(cookie, "HttpOnly") {
		t.Fatalf("session cookie = %q", cookie)
	}
	ck := "Cookie: " + strings.Split(cookie, ";")[0]
	same := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "cookie-001"), ck, "Sec-Fetch-Site: same-origin")
	if same.Status != 200 {
		t.Errorf("same-origin buy with cookie: %v", same)
	}
	cross := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "cookie-002"), ck, "Sec-Fetch-Site: cross-site", "Origin: https://evil.example")
	if cross.Status != 403 || cross.code() != "forbidden" {
		t.Errorf("cross-site buy with cookie: %v, want 403 forbidden", cross)
	}
	for _, name := range []string{"", "   ", strings.Repeat("n", 65)} {
		if r := call(t, st.h, "POST", "/api/session", map[string]any{"name": name}); r.Status != 400 {
			t.Errorf("session for name %q: %v", name, r)
		}
	}
}

func TestSalesAPI(t *testing.T) {
	st := newStack(t)
	now := time.Now().UTC().Truncate(time.Second)
	body := map[string]any{"name": "Midnight drop", "item": "Keyboard K2", "price_cents": 4999, "total": 1000,
		"per_user_limit": 2, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}
	if r := call(t, st.h, "POST", "/admin/api/sales", body); r.Status != 401 || r.code() != "unauthenticated" {
		t.Errorf("create without token: %v", r)
	}
	created := call(t, st.h, "POST", "/admin/api/sales", body, admin())
	if created.Status != 201 || num(created.Body, "remaining") != 1000 || created.Body["status"] != "active" {
		t.Fatalf("create: %v", created)
	}
	id := num(created.Body, "id")
	got := call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d", id), nil)
	for _, k := range []string{"id", "name", "item", "price_cents", "total", "remaining", "per_user_limit", "starts_at", "ends_at", "status"} {
		if got.Body[k] != created.Body[k] {
			t.Errorf("GET %s = %v, created %v", k, got.Body[k], created.Body[k])
		}
	}
	list := call(t, st.h, "GET", "/api/sales", nil)
	if sales, _ := list.Body["sales"].([]any); len(sales) != 1 {
		t.Errorf("list: %v", list)
	}
	if r := call(t, st.h, "GET", "/api/sales/424242", nil); r.Status != 404 || r.code() != "sale_not_found" {
		t.Errorf("unknown sale: %v", r)
	}
	if r := call(t, st.h, "GET", "/admin/api/sales/424242", nil, admin()); r.Status != 404 || r.code() != "sale_not_found" {
		t.Errorf("admin unknown sale: %v", r)
	}

	bad := []struct {
		field string
		mod   func(map[string]any)
	}{
		{"name", func(m map[string]any) { m["name"] = "" }},
		{"item", func(m map[string]any) { m["item"] = strings.Repeat("i", 201) }},
		{"price_cents", func(m map[string]any) { m["price_cents"] = -1 }},
		{"total", func(m map[string]any) { m["total"] = 0 }},
		{"total", func(m map[string]any) { m["total"] = 100_000_001 }},
		{"per_user_limit", func(m map[string]any) { m["per_user_limit"] = 1001 }},
		{"per_user_limit", func(m map[string]any) { m["per_user_limit"] = 0 }},
		{"ends_at", func(m map[string]any) { m["ends_at"] = now.Add(-time.Hour) }},
		{"starts_at", func(m map[string]any) { delete(m, "starts_at") }},
	}
	for _, b := range bad {
		m := map[string]any{}
		for k, v := range body {
			m[k] = v
		}
		b.mod(m)
		r := call(t, st.h, "POST", "/admin/api/sales", m, admin())
		fields, _ := r.Body["error"].(map[string]any)["fields"].([]any)
		if r.Status != 400 || r.code() != "invalid_request" || len(fields) == 0 || fields[0].(map[string]any)["field"] != b.field {
			t.Errorf("bad %s: %v", b.field, r)
		}
	}
	if r := call(t, st.h, "GET", "/api/sales", nil); len(r.Body["sales"].([]any)) != 1 {
		t.Errorf("invalid creations stored a sale: %v", r)
	}
}

// TestMyUnits: GET /api/sales/{id}/mine tells a shopper the units the
// per-user limit counts: none, then what they bought (in a sale of
// several buckets too), never another's.
func TestMyUnits(t *testing.T) {
	st := newStack(t)
	for _, buckets := range []int{1, 4} {
		sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 40, Limit: 5, Buckets: buckets})
		mine := func(user string) response {
			return call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d/mine", sale.ID), nil, bearer(servertest.Token(t, user)))
		}
		alice := fmt.Sprintf("u_mine_a%d", buckets)
		if r := mine(alice); r.Status != 200 || num(r.Body, "bought") != 0 {
			t.Errorf("%d buckets, before buying: %v", buckets, r)
		}
		for i, qty := range []int64{2, 1} {
			if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(qty, fmt.Sprintf("mine-%d-%d", buckets, i)),
				bearer(servertest.Token(t, alice))); r.Status != 200 {
				t.Fatal(r)
			}
		}
		if r := mine(alice); num(r.Body, "bought") != 3 || num(r.Body, "sale_id") != sale.ID {
			t.Errorf("%d buckets, after buying 3: %v", buckets, r)
		}
		if r := mine(fmt.Sprintf("u_mine_b%d", buckets)); num(r.Body, "bought") != 0 {
			t.Errorf("%d buckets, another shopper: %v", buckets, r)
		}
	}
	if r := call(t, st.h, "GET", "/api/sales/424242/mine", nil, bearer(servertest.Token(t, "u_mine_c"))); r.Status != 404 || r.code() != "sale_not_found" {
		t.Errorf("unknown sale: %v", r)
	}
	if r := call(t, st.h, "GET", "/api/sales/1/mine", nil); r.Status != 401 {
		t.Errorf("signed out: %v", r)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	st := newStack(t, "SECKILL_RATE_PER_USER=1000", "SECKILL_RATE_PER_IP=1000")
	// Before any buy, every outcome reads 0 (a dashboard shows 0, not
	// "No data"), as do the limiters' sizes.
	m := call(t, st.h, "GET", "/metrics", nil, admin())
	for _, c := range seckill.Codes() {
		if want := fmt.Sprintf(`seckill_buy_outcomes_total{outcome=%q} 0`, c); !strings.Contains(m.Raw, want) {
			t.Errorf("metrics at the start lack %s", want)
		}
	}
	// So do the answers of payments and of the provider's webhooks the
	// alerts watch.
	for _, c := range []string{"ok", "insufficient_funds", "order_cancelled", "order_refunded", "order_not_found", "unavailable"} {
		if want := fmt.Sprintf(`seckill_payments_total{outcome=%q} 0`, c); !strings.Contains(m.Raw, want) {
			t.Errorf("metrics at the start lack %s", want)
		}
	}
	for _, c := range []string{"ok", "invalid_signature", "invalid_request"} {
		if want := fmt.Sprintf(`seckill_webhooks_total{outcome=%q} 0`, c); !strings.Contains(m.Raw, want) {
			t.Errorf("metrics at the start lack %s", want)
		}
	}
	for _, want := range []string{`seckill_rate_limiter_keys{limiter="user"} 0`, `seckill_rate_limiter_keys{limiter="ip"} 0`} {
		if !strings.Contains(m.Raw, want) {
			t.Errorf("metrics at the start lack %s", want)
		}
	}
	if r := call(t, st.h, "GET", "/healthz", nil); r.Status != 200 {
		t.Errorf("healthz: %v", r)
	}
	if r := call(t, st.h, "GET", "/readyz", nil); r.Status != 200 {
		t.Errorf("readyz: %v", r)
	}
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{})
	call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "metric-001"), bearer(servertest.Token(t, "m")))
	m = call(t, st.h, "GET", "/metrics", nil, admin())
	for _, want := range []string{
		`seckill_http_requests_total{method="POST",route="/api/sales/:id/buy",status="200"} 1`,
		`seckill_buy_outcomes_total{outcome="ok"} 1`,
		`seckill_http_request_duration_seconds_bucket{method="POST",route="/api/sales/:id/buy"`,
	} {
		if !strings.Contains(m.Raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// With Redis gone, readiness fails and names it.
	down := servertest.New(t)
	broken := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { broken.Close() })
	down.Redis = broken
	srv := down.Server(t, nil)
	r := call(t, srv.Handler(), "GET", "/readyz", nil)
	failing, _ := r.Body["failing"].(map[string]any)
	if r.Status != 503 || failing["redis"] == nil || failing["mysql"] != nil {
		t.Errorf("readyz with Redis down: %v", r)
	}
}
