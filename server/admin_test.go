package server_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/system/servertest"
)

// TestAdminAuth: every admin route refuses without a session or token; a
// login sets an HttpOnly SameSite=Strict cookie that works until logout;
// a cross-site state change with the cookie is refused and changes
// nothing; wrong passwords are rate-limited.
func TestAdminAuth(t *testing.T) {
	st := newStack(t)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10})
	id := sale.ID
	routes := [][2]string{
		{"POST", "/admin/api/sales"}, {"GET", "/admin/api/sales"}, {"GET", fmt.Sprintf("/admin/api/sales/%d", id)},
		{"PATCH", fmt.Sprintf("/admin/api/sales/%d", id)}, {"POST", fmt.Sprintf("/admin/api/sales/%d/restock", id)},
		{"POST", fmt.Sprintf("/admin/api/sales/%d/pause", id)}, {"POST", fmt.Sprintf("/admin/api/sales/%d/resume", id)},
		{"POST", fmt.Sprintf("/admin/api/sales/%d/end", id)}, {"GET", fmt.Sprintf("/admin/api/sales/%d/stats", id)},
	}
	before := snapshot(t, st, id)
	for _, creds := range [][]string{
		nil, {bearer("wrong-token")}, {"Cookie: sk_admin=" + strings.Repeat("a", 64)}, {"Cookie: sk_admin=short"},
	} {
		for _, r := range routes {
			res := call(t, st.h, r[0], r[1], `{"qty":1,"name":"x"}`, creds...)
			if res.Status != 401 || res.code() != "unauthenticated" {
				t.Errorf("%s %s with %v: %v, want 401 unauthenticated", r[0], r[1], creds, res)
			}
		}
	}
	if res := call(t, st.h, "GET", "/admin/api/session", nil); res.Status != 200 || res.Body["signed_in"] != false {
		t.Errorf("session without login: %v", res)
	}

	login := call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": servertest.AdminPassword})
	if login.Status != 200 {
		t.Fatalf("login: %v", login)
	}
	set := login.Header.Get("Set-Cookie")
	for _, want := range []string{"sk_admin=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(set, want) {
			t.Errorf("admin cookie %q lacks %s", set, want)
		}
	}
	ck := "Cookie: " + strings.Split(set, ";")[0]
	if res := call(t, st.h, "GET", "/admin/api/sales", nil, ck); res.Status != 200 {
		t.Errorf("list with the cookie: %v", res)
	}
	if res := call(t, st.h, "GET", "/admin/api/session", nil, ck); res.Body["signed_in"] != true {
		t.Errorf("session after login: %v", res)
	}
	cross := call(t, st.h, "POST", fmt.Sprintf("/admin/api/sales/%d/pause", id), nil, ck,
		"Sec-Fetch-Site: cross-site", "Origin: https://evil.example")
	if cross.Status != 403 || cross.code() != "forbidden" {
		t.Errorf("cross-site pause with the cookie: %v, want 403", cross)
	}
	if after := snapshot(t, st, id); after != before {
		t.Errorf("refused requests changed the sale:\n%s\n%s", before, after)
	}
	if res := call(t, st.h, "POST", fmt.Sprintf("/admin/api/sales/%d/pause", id), nil, ck, "Sec-Fetch-Site: same-origin"); res.Status != 200 {
		t.Errorf("same-origin pause with the cookie: %v", res)
	}
	out := call(t, st.h, "POST", "/admin/api/logout", nil, ck)
	if out.Status != 200 || !strings.Contains(out.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: %v %q", out, out.Header.Get("Set-Cookie"))
	}
	if res := call(t, st.h, "GET", "/admin/api/sales", nil, ck); res.Status != 401 {
		t.Errorf("the old cookie after logout: %v", res)
	}

	// Wrong passwords: a few tries, then 429 with Retry-After, and while
	// limited even the right password waits.
	limited := false
	for i := range 10 {
		res := call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": fmt.Sprint("guess-", i)})
		if res.Status == 429 {
			if res.code() != "rate_limited" || res.Header.Get("Retry-After") == "" {
				t.Errorf("limited login: %v %v", res, res.Header)
			}
			limited = true
			break
		}
		if res.Status != 401 {
			t.Fatalf("wrong password: %v", res)
		}
	}
	if !limited {
		t.Fatal("10 wrong passwords in a row were never rate-limited")
	}
	if res := call(t, st.h, "POST", "/admin/api/login", map[string]any{"password": servertest.AdminPassword}); res.Status != 429 {
		t.Errorf("right password while limited: %v", res)
	}
}

// TestShopperSessionEndpoints: the page asks who is signed in without a
// 401, and signing out clears the cookie.
func TestShopperSessionEndpoints(t *testing.T) {
	st := newStack(t)
	if r := call(t, st.h, "GET", "/api/session", nil); r.Status != 200 || r.Body["signed_in"] != false {
		t.Errorf("no session: %v", r)
	}
	if r := call(t, st.h, "GET", "/api/session", nil, "Cookie: sk_session=forged.token.here"); r.Body["signed_in"] != false {
		t.Errorf("forged session: %v", r)
	}
	tok := servertest.Token(t, "carol")
	if r := call(t, st.h, "GET", "/api/session", nil, "Cookie: sk_session="+tok); r.Body["signed_in"] != true || r.Body["name"] != "carol" {
		t.Errorf("cookie session: %v", r)
	}
	r := call(t, st.h, "DELETE", "/api/session", nil)
	if r.Status != 200 || !strings.Contains(r.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("sign out: %v %q", r, r.Header.Get("Set-Cookie"))
	}
}

// TestPagesServed: the pages and assets come from the binary with a
// content security policy.
func TestPagesServed(t *testing.T) {
	st := newStack(t)
	for path, want := range map[string]string{
		"/": "shop.js", "/admin": "admin.js", "/static/common.js": "watchStock", "/static/style.css": "--brand",
	} {
		rec := httptest.NewRecorder()
		st.h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d, body lacks %q", path, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
	if r := call(t, st.h, "GET", "/static/missing.js", nil); r.Status != 404 {
		t.Errorf("missing asset: %v", r)
	}
}

// TestEveryRouteDocumented: docs/api.md names every route the server
// answers, as "METHOD /path" with {param} for a parameter.
func TestEveryRouteDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	st := newStack(t)
	engine, ok := st.h.(*gin.Engine)
	if !ok {
		t.Fatalf("the handler is a %T", st.h)
	}
	param := regexp.MustCompile(`[:*](\w+)`)
	for _, r := range engine.Routes() {
		route := r.Method + " " + param.ReplaceAllString(r.Path, "{$1}")
		if !strings.Contains(string(doc), "`"+route+"`") {
			t.Errorf("docs/api.md does not name the route %s", route)
		}
	}
}
