package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/sessions"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
)

// TestEveryRefusalIsJSON: unknown assets, paths that climb out of
// /static/ and stray trailing slashes get the JSON 404, a method a route
// does not take the JSON 405 with Allow, never Gin's or the file
// server's plain text; a browser navigating to an unknown page gets a
// page.
func TestEveryRefusalIsJSON(t *testing.T) {
	st := newStack(t)
	ts := servertest.HTTP(t, st.h)
	for _, tc := range []struct{ method, path, status, code string }{
		{"GET", "/static/no-such-file.js", "404", "not_found"}, {"GET", "/static/../go.mod", "404", "not_found"},
		{"GET", "/static/%2e%2e/go.mod", "404", "not_found"}, {"GET", "/static/", "404", "not_found"},
		{"GET", "/static", "404", "not_found"}, {"GET", "/api/sales/", "404", "not_found"}, {"GET", "/ws/sales/", "404", "not_found"},
		{"PUT", "/api/sales", "405", "method_not_allowed"}, {"DELETE", "/admin/api/sales/1", "405", "method_not_allowed"},
		{"POST", "/healthz", "405", "method_not_allowed"},
	} {
		// A raw request line, so no client cleans the path first.
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tc.method, tc.path, ts.Listener.Addr())
		raw, _ := io.ReadAll(conn)
		conn.Close()
		head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.1 "+tc.status) || !strings.Contains(head, "application/json") ||
			!strings.Contains(body, `"code":"`+tc.code+`"`) || tc.status == "405" != strings.Contains(head, "\r\nAllow: ") {
			t.Errorf("%s %s: %q", tc.method, tc.path, raw)
		}
	}
	r := call(t, st.h, "GET", "/no-such-page", nil, "Accept: text/html,application/xhtml+xml")
	if r.Status != 404 || !strings.Contains(r.Raw, "This page does not exist") {
		t.Errorf("a browser's unknown page: %v", r)
	}
	if r := call(t, st.h, "GET", "/static/style.css", nil); r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/css") {
		t.Errorf("an asset: %d %v", r.Status, r.Header)
	}
}

// TestSlowBodyIsCutOff: a client that trickles its body a byte at a time
// is answered 408 once http_read_timeout has passed, long before it has
// sent the body.
func TestSlowBodyIsCutOff(t *testing.T) {
	st := newStack(t, "SECKILL_HTTP_READ_TIMEOUT=500ms")
	addr := runServer(t, st.srv)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"qty":1,"request_id":"slow-body-0001"}` + strings.Repeat(" ", 160)
	fmt.Fprintf(conn, "POST /api/sales/1/buy HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, servertest.Token(t, "slow"), len(body))
	answer := make(chan string, 1)
	go func() {
		raw, _ := io.ReadAll(conn)
		answer <- string(raw)
	}()
	tick := time.NewTicker(100 * time.Millisecond) // the client's pace: 200 bytes would take 20 s
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case raw := <-answer:
			if !strings.HasPrefix(raw, "HTTP/1.1 408") || !strings.Contains(raw, `"code":"request_timeout"`) {
				t.Errorf("after %d bytes: %q", i, raw)
			}
			return
		case <-tick.C:
			if i == len(body) {
				t.Fatal("the whole trickled body was read")
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				t.Logf("write after %d bytes: %v", i, err)
			}
		}
	}
}

// runServer serves srv with Run (the real http.Server settings) on a
// loopback port until the test ends.
func runServer(t *testing.T, srv *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Run(ctx, ln)
	}()
	t.Cleanup(func() { stop(); <-done })
	return ln.Addr().String()
}

// TestWebSocketCapsAndHost: connections are capped per client IP and in
// total, the excess refused with 429 and counted; an upgrade naming a host
// that is not this site's (DNS rebinding: Origin and Host agree, both
// foreign) is refused.
func TestWebSocketCapsAndHost(t *testing.T) {
	st := newStack(t, "SECKILL_WS_MAX_PER_IP=2", "SECKILL_WS_MAX_TOTAL=3", "SECKILL_TRUSTED_PROXIES=127.0.0.1")
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10})
	ts := servertest.HTTP(t, st.h)
	from := func(ip string) http.Header { return http.Header{"X-Forwarded-For": {ip}} }

	var open []io.Closer
	for range 2 {
		c, _, err := servertest.DialWS(t, ts.URL, sale.ID, from("198.51.100.1"))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	refused := func(ip, reason string) {
		t.Helper()
		_, res, err := servertest.DialWS(t, ts.URL, sale.ID, from(ip))
		if err == nil || res == nil || res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
			t.Fatalf("connection over the %s cap: %v %v", reason, res, err)
		}
		body, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(body), `"code":"rate_limited"`) {
			t.Errorf("refusal body %s", body)
		}
	}
	refused("198.51.100.1", "per-IP")
	c, _, err := servertest.DialWS(t, ts.URL, sale.ID, from("198.51.100.2"))
	if err != nil {
		t.Fatal(err)
	}
	open = append(open, c)
	refused("198.51.100.3", "total")
	m := call(t, st.h, "GET", "/metrics", nil, admin()).Raw
	for _, want := range []string{`seckill_ws_refused_total{reason="per_ip"} 1`, `seckill_ws_refused_total{reason="total"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A closed connection gives its place back.
	open[0].Close()
	servertest.WaitFor(t, 5*time.Second, "a place after a close", func() (bool, string) {
		c, res, err := servertest.DialWS(t, ts.URL, sale.ID, from("198.51.100.1"))
		if err != nil {
			return false, fmt.Sprint(res, err)
		}
		c.Close()
		return true, ""
	})

	port := ts.Listener.Addr().(*net.TCPAddr).Port
	rebound := http.Header{"Host": {fmt.Sprintf("evil.example:%d", port)}, "Origin": {fmt.Sprintf("http://evil.example:%d", port)}}
	if _, res, err := servertest.DialWS(t, ts.URL, sale.ID, rebound); err == nil || res == nil || res.StatusCode != 403 {
		t.Errorf("DNS-rebound upgrade: %v %v", res, err)
	}
	// Places free up as the server notices the closes.
	for _, c := range open {
		c.Close()
	}
	local := http.Header{"Host": {fmt.Sprintf("localhost:%d", port)}, "Origin": {fmt.Sprintf("http://localhost:%d", port)}}
	servertest.WaitFor(t, 5*time.Second, "a localhost upgrade", func() (bool, string) {
		c, res, err := servertest.DialWS(t, ts.URL, sale.ID, local)
		if err != nil {
			if res != nil && res.StatusCode == 403 {
				t.Fatalf("localhost upgrade refused as a foreign host: %v", res)
			}
			return false, fmt.Sprint(res, err)
		}
		c.Close()
		return true, ""
	})

	// With public origins configured, only their hosts are served.
	pub := newStack(t, "SECKILL_PUBLIC_ORIGINS=https://shop.example")
	psale := servertest.MustSale(t, pub.srv, servertest.SaleSpec{Total: 10})
	pts := servertest.HTTP(t, pub.h)
	if c, res, err := servertest.DialWS(t, pts.URL, psale.ID, http.Header{"Host": {"shop.example"}, "Origin": {"https://shop.example"}}); err != nil {
		t.Errorf("public host: %v %v", res, err)
	} else {
		c.Close()
	}
	if _, res, err := servertest.DialWS(t, pts.URL, psale.ID, nil); err == nil || res.StatusCode != 403 {
		t.Errorf("loopback host with public origins set: %v %v", res, err)
	}
}

// TestOpsEndpoints: /metrics on the public listener needs the admin
// token; the ops handler serves metrics and the profiler.
func TestOpsEndpoints(t *testing.T) {
	st := newStack(t)
	if r := call(t, st.h, "GET", "/metrics", nil); r.Status != 401 || r.code() != "unauthenticated" {
		t.Errorf("public /metrics without the admin token: %v", r)
	}
	if r := call(t, st.h, "GET", "/debug/pprof/", nil, admin()); r.Status != 404 {
		t.Errorf("pprof on the public listener: %d", r.Status)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "ops_test_total", Help: "x"}))
	ops := server.OpsHandler(reg, nil)
	for path, want := range map[string]string{"/metrics": "ops_test_total 0", "/debug/pprof/": "goroutine", "/healthz": "ok"} {
		rec := httptest.NewRecorder()
		ops.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("ops %s: %d %.200s", path, rec.Code, rec.Body.String())
		}
	}
}

// TestTokenRules: a token whose times are not JSON numbers is refused;
// signing out revokes the user's tokens issued until then, in every
// process, while a token issued later works.
func TestTokenRules(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 100, Limit: 50})
	sign := func(claims jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(servertest.JWTSecret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	exp := time.Now().Add(time.Hour).Unix()
	for name, tc := range map[string]struct {
		claims jwt.MapClaims
		status int
	}{
		"numeric exp":   {jwt.MapClaims{"sub": "u-num", "exp": exp}, 200},
		"string exp":    {jwt.MapClaims{"sub": "u-str", "exp": fmt.Sprint(exp)}, 401},
		"string iat":    {jwt.MapClaims{"sub": "u-iat", "exp": exp, "iat": "1"}, 401},
		"no exp":        {jwt.MapClaims{"sub": "u-none"}, 401},
		"object exp":    {jwt.MapClaims{"sub": "u-obj", "exp": map[string]any{"n": exp}}, 401},
		"bad subject":   {jwt.MapClaims{"sub": "a|b", "exp": exp}, 401},
		"empty subject": {jwt.MapClaims{"sub": "", "exp": exp}, 401},
	} {
		r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "tok-"+strings.ReplaceAll(name, " ", "-")), bearer(sign(tc.claims)))
		if r.Status != tc.status {
			t.Errorf("%s: %v, want %d", name, r, tc.status)
		}
	}

	addr2 := runServer(t, st.Env.Server(t, nil)) // a second process on the same Redis

	old := servertest.Token(t, "leaver")
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "before-signout"), bearer(old)); r.Status != 200 {
		t.Fatalf("buy before sign-out: %v", r)
	}
	if r := call(t, st.h, "DELETE", "/api/session", nil, bearer(old)); r.Status != 200 {
		t.Fatalf("sign out: %v", r)
	}
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "after-signout"), bearer(old)); r.Status != 401 || !strings.Contains(r.Raw, "signed out") {
		t.Errorf("buy with a signed-out token: %v", r)
	}
	if r := call(t, st.h, "GET", "/api/session", nil, "Cookie: sk_session="+old); r.Body["signed_in"] != false {
		t.Errorf("session of a signed-out token: %v", r)
	}
	servertest.WaitFor(t, 5*time.Second, "the other process to refuse the token", func() (bool, string) {
		status := ordersStatus(t, addr2, old)
		return status == 401, fmt.Sprint(status)
	})
	later, _, _ := sessions.MintToken([]byte(servertest.JWTSecret), "leaver", "leaver", time.Hour, time.Now().Add(2*time.Second))
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "new-session"), bearer(later)); r.Status != 200 {
		t.Errorf("buy with a token issued after the sign-out: %v", r)
	}
	// A new process learns the sign-outs before it serves.
	if status := ordersStatus(t, runServer(t, st.Env.Server(t, nil)), old); status != 401 {
		t.Errorf("a process started after the sign-out: %d", status)
	}
}

// ordersStatus is the status of GET /api/orders on a running server.
func ordersStatus(t *testing.T, addr, tok string) int {
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/orders", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestLoginBurst: a merchant who mistypes may try again at once, a few
// times; then the per-minute budget applies.
func TestLoginBurst(t *testing.T) {
	st := newStack(t)
	for i := range 5 {
		if r := call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": fmt.Sprint("typo-", i)}); r.Status != 401 {
			t.Fatalf("attempt %d: %v", i+1, r)
		}
	}
	if r := call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": servertest.AdminPassword}); r.Status != 429 {
		t.Errorf("sixth attempt within the minute: %v", r)
	}
}

// blocked is a Reserver whose decisions never come: the buy waits until
// its client leaves.
type blocked struct{}

func (blocked) Reserve(ctx context.Context, _ int64, _ []seckill.Buy) (seckill.Decision, error) {
	<-ctx.Done()
	return seckill.Decision{}, ctx.Err()
}

// TestClientGoneIsNotAnError: a buy whose client left before the answer
// is counted as a cancellation, not logged as a 500.
func TestClientGoneIsNotAnError(t *testing.T) {
	env := servertest.New(t)
	srv := env.Server(t, blocked{})
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 10})
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	defer slog.SetDefault(prev)

	gone, hangUp := context.WithCancel(context.Background())
	hangUp()
	req := httptest.NewRequestWithContext(gone, "POST", buyPath(sale.ID), strings.NewReader(`{"qty":1,"request_id":"gone-client-1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+servertest.Token(t, "gone"))
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if strings.Contains(logs.String(), "ERROR") {
		t.Errorf("a client leaving was logged as an error:\n%s", logs.String())
	}
	m := call(t, srv.Handler(), "GET", "/metrics", nil, admin()).Raw
	if !strings.Contains(m, `seckill_buy_outcomes_total{outcome="client_cancelled"} 1`) ||
		!strings.Contains(m, `status="499"`) {
		t.Errorf("cancellation not counted:\n%s", grep(m, "seckill_buy_outcomes_total", `status="`))
	}
}

// grep keeps the lines holding any of the words.
func grep(text string, words ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestDeadLettersShown: the dead-letter count is in /readyz (ready or
// not) and in a sale's stats for the dashboard.
func TestDeadLettersShown(t *testing.T) {
	env := servertest.New(t)
	reg := prometheus.NewRegistry()
	d, err := env.System(reg).ServerDeps(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.DeadLetters = func(context.Context) (int, error) { return 3, nil }
	srv, err := server.New(system.ServerConfig(env.Config), d)
	if err != nil {
		t.Fatal(err)
	}
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 5})
	if r := call(t, srv.Handler(), "GET", "/readyz", nil); r.Status != 200 || num(r.Body, "dead_letters") != 3 {
		t.Errorf("readyz: %v", r)
	}
	if r := call(t, srv.Handler(), "GET", fmt.Sprintf("/admin/api/sales/%d/stats", sale.ID), nil, admin()); r.Status != 200 || num(r.Body, "dead_letters") != 3 {
		t.Errorf("stats: %v", r)
	}
}

// TestRefusalsInTheAskersLanguage: a refusal's message follows
// Accept-Language (Simplified Chinese or English), its fields' messages
// too; its code never changes; a message of a refusal's own stays.
func TestRefusalsInTheAskersLanguage(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 1, Limit: 1})
	tok := bearer(servertest.Token(t, "u_lang_1"))
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "lang-buy-1"), tok); r.Status != 200 {
		t.Fatal(r)
	}
	other := bearer(servertest.Token(t, "u_lang_2"))
	for i, tc := range []struct{ lang, want string }{
		{"", seckill.CodeSoldOut.Message()},
		{"en-GB,en;q=0.9", seckill.CodeSoldOut.Message()},
		{"zh-CN,zh;q=0.9,en;q=0.8", "已售罄：剩余库存不足此数量。"},
		{"fr-FR", seckill.CodeSoldOut.Message()},
	} {
		r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("lang-buy-%d", 10+i)), other, "Accept-Language: "+tc.lang)
		if r.code() != "sold_out" || r.message() != tc.want {
			t.Errorf("Accept-Language %q: %v", tc.lang, r)
		}
	}
	// No such sale, in Chinese: the code's message is the catalogue's.
	if r := call(t, st.h, "GET", "/api/sales/987654321", nil, "Accept-Language: zh-CN"); r.code() != "sale_not_found" || r.message() != "没有这个活动。" {
		t.Errorf("no such sale in Chinese: %v", r)
	}
	// A refusal with fields: each field's message in Chinese, figures
	// kept, and the message that joins them; in English as before.
	r := call(t, st.h, "GET", "/admin/api/audit?limit=0", nil, admin(), "Accept-Language: zh-CN")
	fields, _ := r.Body["error"].(map[string]any)["fields"].([]any)
	if r.code() != "invalid_request" || len(fields) != 1 || fields[0].(map[string]any)["field"] != "limit" ||
		fields[0].(map[string]any)["message"] != "必须在 1 到 500 之间" || r.message() != "limit: 必须在 1 到 500 之间" {
		t.Errorf("a refusal with fields in Chinese: %v", r)
	}
	if r := call(t, st.h, "GET", "/admin/api/audit?limit=0", nil, admin()); r.message() != "limit: must be 1 to 500" {
		t.Errorf("the same in English: %v", r)
	}
	// A message of a refusal's own (not the table's, no fields) stays.
	if r := call(t, st.h, "GET", "/api/orders", nil, "Accept-Language: zh-CN"); r.code() != "unauthenticated" || r.message() != "Sign in first: no session token." {
		t.Errorf("a message of its own: %v", r)
	}
}
