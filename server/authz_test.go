package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/pquerna/otp/totp"

	"github.com/seckill/seckill/images/imagestest"
)

// admins are the principals of the authorization matrix: each a header
// to send, or none.
type admins struct {
	operator, a, b, disabled, none, forged []string
	aID, bID, cID                          int64
	// target is a merchant that the merchant routes act on.
	target int64
}

// merchantLogin creates a merchant (as the operator) and logs it in: its
// id and cookie header.
func merchantLogin(t *testing.T, st *stack, email string) (int64, string) {
	t.Helper()
	r := call(t, st.h, "POST", "/admin/api/merchants", map[string]any{"email": email, "name": email, "password": "merchant password"}, admin())
	if r.Status != 201 || r.Body["role"] != "merchant" || r.Body["disabled"] != false {
		t.Fatalf("create merchant %s: %v", email, r)
	}
	return num(r.Body, "id"), login(t, st, map[string]any{"email": email, "password": "merchant password"})
}

// login logs in with body and returns the session's cookie header.
func login(t *testing.T, st *stack, body map[string]any) string {
	t.Helper()
	r := call(t, st.h, "POST", "/admin/api/login", body)
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "sk_admin" && c.Value != "" {
			return "Cookie: sk_admin=" + c.Value
		}
	}
	t.Fatalf("login %v: %v", body, r)
	return ""
}

func newAdmins(t *testing.T, st *stack) admins {
	var p admins
	var a, b, c string
	p.aID, a = merchantLogin(t, st, "a@shop.example")
	p.bID, b = merchantLogin(t, st, "b@shop.example")
	p.cID, c = merchantLogin(t, st, "c@shop.example")
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/disable", p.cID), nil, admin()); r.Status != 200 || r.Body["disabled"] != true {
		t.Fatalf("disable: %v", r)
	}
	p.target, _ = merchantLogin(t, st, "target@shop.example")
	p.operator, p.a, p.b, p.disabled = []string{admin()}, []string{a}, []string{b}, []string{c}
	p.forged = []string{"Cookie: sk_admin=" + strings.Repeat("f", 64)}
	return p
}

// saleOf creates a sale as a merchant (its cookie) and returns its id.
func saleOf(t *testing.T, st *stack, who []string) int64 {
	t.Helper()
	now := time.Now().UTC()
	r := call(t, st.h, "POST", "/admin/api/sales", map[string]any{"name": "Owned", "item": "Thing", "price_cents": 100,
		"total": 10, "per_user_limit": 1, "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}, who...)
	if r.Status != 201 {
		t.Fatalf("create a sale: %v", r)
	}
	return num(r.Body, "id")
}

// TestAuthorizationMatrix: every admin route (from the server's route
// table: a route without a row fails the test) against the operator,
// merchant A (the sale's owner), merchant B, a disabled merchant, no
// session and a forged cookie: the status and code each gets, and that
// B's attempts on A's sale change nothing.
func TestAuthorizationMatrix(t *testing.T) {
	st := newStack(t)
	p := newAdmins(t, st)
	type row struct {
		body any
		// owned: the route acts on a sale ({id}: one of A's, made for
		// each try); merchantOnly / operatorOnly: who may use it at all.
		owned, operatorOnly, merchantOnly, public bool
		// order: the route acts on an order the matrix does not make:
		// 404 order_not_found for whoever may use it.
		order bool
	}
	now := time.Now().UTC()
	newSale := map[string]any{"name": "New", "item": "Thing", "price_cents": 100, "total": 10, "per_user_limit": 1,
		"starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour)}
	rows := map[string]row{
		"POST /admin/api/login":                     {public: true},
		"POST /admin/api/logout":                    {public: true},
		"GET /admin/api/session":                    {public: true},
		"POST /admin/api/sales":                     {body: newSale},
		"GET /admin/api/sales":                      {},
		"GET /admin/api/sales/{id}":                 {owned: true},
		"PATCH /admin/api/sales/{id}":               {owned: true, body: map[string]any{"price_cents": 49}},
		"POST /admin/api/sales/{id}/restock":        {owned: true, body: map[string]any{"qty": 5}},
		"POST /admin/api/sales/{id}/pause":          {owned: true},
		"POST /admin/api/sales/{id}/resume":         {owned: true},
		"POST /admin/api/sales/{id}/end":            {owned: true},
		"PUT /admin/api/sales/{id}/image":           {owned: true, body: string(imagestest.PNG(40, 30))},
		"DELETE /admin/api/sales/{id}/image":        {owned: true},
		"GET /admin/api/sales/{id}/stats":           {owned: true},
		"GET /admin/api/sales/{id}/history":         {owned: true},
		"GET /admin/api/audit":                      {},
		"POST /admin/api/merchants":                 {operatorOnly: true, body: map[string]any{"email": "new@shop.example", "name": "New", "password": "a long password"}},
		"GET /admin/api/merchants":                  {operatorOnly: true},
		"POST /admin/api/merchants/{id}/disable":    {operatorOnly: true},
		"POST /admin/api/merchants/{id}/enable":     {operatorOnly: true},
		"POST /admin/api/merchants/{id}/totp/reset": {operatorOnly: true},
		"POST /admin/api/me/totp":                   {merchantOnly: true},
		"POST /admin/api/me/totp/confirm":           {merchantOnly: true, body: map[string]any{"code": "000000"}},
		"GET /admin/api/balance":                    {},
		"GET /admin/api/transfers":                  {},
		"POST /admin/api/wallets/{user_id}/credit":  {operatorOnly: true, body: map[string]any{"amount_cents": 100, "reason": "goodwill", "request_id": "matrix-credit"}},
		"POST /admin/api/orders/{id}/refund":        {order: true, body: map[string]any{"reason": "matrix"}},
		// A merchant's payout of nothing is 400 (past the role check).
		"POST /admin/api/payouts":                       {merchantOnly: true, body: map[string]any{"amount_cents": 0, "request_id": "matrix-payout"}},
		"POST /admin/api/merchants/{id}/payout-account": {operatorOnly: true, body: map[string]any{"account": "acct_matrix"}},
	}
	param := regexp.MustCompile(`[:*](\w+)`)
	rows["GET /metrics"] = row{operatorOnly: true}
	for _, r := range st.h.(*gin.Engine).Routes() {
		route := r.Method + " " + param.ReplaceAllString(r.Path, "{$1}")
		if !strings.HasPrefix(r.Path, "/admin/api/") && r.Path != "/metrics" {
			continue
		}
		rw, ok := rows[route]
		if !ok {
			t.Errorf("%s has no row in the authorization matrix", route)
			continue
		}
		if rw.public {
			continue
		}
		for _, who := range []struct {
			name string
			hdr  []string
		}{{"operator", p.operator}, {"merchant A", p.a}, {"merchant B", p.b}, {"disabled", p.disabled}, {"no session", p.none}, {"forged", p.forged}} {
			path := r.Path
			var sale int64
			if rw.owned {
				sale = saleOf(t, st, p.a)
				path = strings.Replace(path, ":id", fmt.Sprint(sale), 1)
			}
			path = strings.Replace(path, ":id", fmt.Sprint(p.target), 1) // a merchant route
			path = strings.Replace(path, ":user_id", "u_matrix", 1)      // a wallet
			before := ""
			if sale > 0 {
				before = snapshot(t, st, sale)
			}
			res := call(t, st.h, r.Method, path, rw.body, who.hdr...)
			var want int
			switch {
			case who.name == "disabled" || who.name == "no session" || who.name == "forged":
				want = 401
			case rw.operatorOnly && who.name != "operator":
				want = 403
			case rw.merchantOnly && who.name == "operator":
				want = 403
			case rw.owned && who.name == "merchant B", rw.order:
				want = 404
			}
			switch {
			case want == 0 && res.Status >= 400 && !(rw.merchantOnly && res.Status == 400): // a wrong code is 400
				t.Errorf("%s as %s: %v, want success", route, who.name, res)
			case want != 0 && res.Status != want:
				t.Errorf("%s as %s: %v, want %d", route, who.name, res, want)
			case want == 404 && rw.order && res.code() != "order_not_found":
				t.Errorf("%s as %s: code %q, want order_not_found", route, who.name, res.code())
			case want == 404 && !rw.order && res.code() != "sale_not_found":
				t.Errorf("%s as %s: code %q, want sale_not_found (as an unknown sale)", route, who.name, res.code())
			}
			if want != 0 && sale > 0 {
				if after := snapshot(t, st, sale); after != before {
					t.Errorf("%s as %s changed the sale:\n%s\n%s", route, who.name, before, after)
				}
				if sl, err := st.Ledger.Sale(t.Context(), sale); err != nil || sl.PriceCents != 100 || sl.Total != 10 || sl.Status != "active" {
					t.Errorf("%s as %s: the ledger holds %+v (%v)", route, who.name, sl, err)
				}
			}
		}
	}

	// What each sees of the lists: A its own sales, B none of A's; the
	// operator all; the audit log likewise.
	aSale := saleOf(t, st, p.a)
	lists := map[string][]string{"operator": p.operator, "merchant A": p.a, "merchant B": p.b}
	for name, hdr := range lists {
		r := call(t, st.h, "GET", "/admin/api/sales", nil, hdr...)
		seen, others := false, 0
		for _, s := range r.Body["sales"].([]any) {
			m := s.(map[string]any)
			if num(m, "id") == aSale {
				seen = true
			}
			if name != "operator" && name == "merchant A" && num(m, "merchant_id") != p.aID {
				others++
			}
		}
		if seen != (name != "merchant B") || others != 0 {
			t.Errorf("%s's sale list: A's sale seen %v, other merchants' %d", name, seen, others)
		}
		audit := call(t, st.h, "GET", fmt.Sprintf("/admin/api/audit?sale_id=%d", aSale), nil, hdr...)
		if n := len(audit.Body["entries"].([]any)); (n > 0) != (name != "merchant B") {
			t.Errorf("%s reads %d audit rows of A's sale", name, n)
		}
	}
	// A merchant may not hand its sale to another; the operator may.
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", aSale), map[string]any{"merchant_id": p.bID}, p.a...); r.Status != 403 {
		t.Errorf("A hands its sale to B: %v", r)
	}
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", aSale), map[string]any{"merchant_id": p.bID}, p.operator...); r.Status != 200 || num(r.Body, "merchant_id") != p.bID {
		t.Errorf("the operator hands A's sale to B: %v", r)
	}
	if r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d", aSale), nil, p.a...); r.Status != 404 {
		t.Errorf("A after the hand-over: %v", r)
	}
	// The history stays A's: B reads none of the rows from before.
	if r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/audit?sale_id=%d", aSale), nil, p.b...); len(r.Body["entries"].([]any)) != 0 {
		t.Errorf("B reads A's history of the sale handed over: %v", r)
	}
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", aSale), map[string]any{"price_cents": 77}, p.b...); r.Status != 200 {
		t.Errorf("B changes its new sale: %v", r)
	}
	for _, e := range call(t, st.h, "GET", fmt.Sprintf("/admin/api/audit?sale_id=%d", aSale), nil, p.b...).Body["entries"].([]any) {
		if e := e.(map[string]any); e["actor"] != "b@shop.example" || e["ip"] == "" {
			t.Errorf("B's rows of its sale: %v", e)
		}
	}
	// A disabled merchant cannot log in; enabled again, it can.
	if r := call(t, st.h, "POST", "/admin/api/login", map[string]any{"email": "c@shop.example", "password": "merchant password"}); r.Status != 401 {
		t.Errorf("a disabled merchant logs in: %v", r)
	}
	call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/enable", p.cID), nil, admin())
	if r := call(t, st.h, "GET", "/admin/api/sales", nil, p.disabled...); r.Status != 401 {
		t.Errorf("a session from before the disabling, after enabling: %v, want 401", r)
	}
	// (From another address: this one spent its logins of the minute.)
	if code := loginFrom(st, "192.0.2.77", `{"email":"c@shop.example","password":"merchant password"}`); code != 200 {
		t.Errorf("the enabled merchant logs in again: %d", code)
	}
}

// loginFrom sends an admin login from another client address and returns
// its status.
func loginFrom(st *stack, ip, body string) int {
	req := httptest.NewRequest("POST", "/admin/api/login", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = ip + ":1234"
	rec := httptest.NewRecorder()
	st.h.ServeHTTP(rec, req)
	return rec.Code
}

// TestMerchantTOTP: enrol, confirm with a code, then log in only with a
// code, each code once.
func TestMerchantTOTP(t *testing.T) {
	st := newStack(t)
	_, cookie := merchantLogin(t, st, "totp@shop.example")
	r := call(t, st.h, "POST", "/admin/api/me/totp", nil, cookie)
	secret, _ := r.Body["secret"].(string)
	if r.Status != 200 || secret == "" || !strings.HasPrefix(fmt.Sprint(r.Body["otpauth_url"]), "otpauth://totp/") {
		t.Fatalf("enrol: %v", r)
	}
	if r := call(t, st.h, "POST", "/admin/api/me/totp/confirm", map[string]any{"code": "123456x"}, cookie); r.Status != 400 {
		t.Errorf("confirm with a bad code: %v", r)
	}
	code, _ := totp.GenerateCode(secret, time.Now())
	if r := call(t, st.h, "POST", "/admin/api/me/totp/confirm", map[string]any{"code": code}, cookie); r.Status != 200 {
		t.Fatalf("confirm: %v", r)
	}
	creds := map[string]any{"email": "totp@shop.example", "password": "merchant password"}
	// (Five logins in all: the limit of a minute, per address and account.)
	for name, c := range map[string]string{"no code": "", "the confirming code again": code} {
		body := map[string]any{"email": creds["email"], "password": creds["password"], "totp": c}
		if r := call(t, st.h, "POST", "/admin/api/login", body); r.Status != 401 {
			t.Errorf("login with %s: %v", name, r)
		}
	}
	next, _ := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	body := map[string]any{"email": creds["email"], "password": creds["password"], "totp": next}
	if r := call(t, st.h, "POST", "/admin/api/login", body); r.Status != 200 {
		t.Errorf("login with a fresh code: %v", r)
	}
	if r := call(t, st.h, "POST", "/admin/api/login", body); r.Status != 401 {
		t.Errorf("the same code twice: %v", r)
	}
	// The operator resets the factor (a lost phone): the password alone
	// works again.
	id := num(call(t, st.h, "GET", "/admin/api/merchants", nil, admin()).Body["merchants"].([]any)[0].(map[string]any), "id")
	if r := call(t, st.h, "POST", fmt.Sprintf("/admin/api/merchants/%d/totp/reset", id), nil, admin()); r.Status != 200 || r.Body["totp"] != false {
		t.Fatalf("reset: %v", r)
	}
	if code := loginFrom(st, "192.0.2.78", `{"email":"totp@shop.example","password":"merchant password"}`); code != 200 {
		t.Errorf("login after the reset: %d", code)
	}
	rows := auditRows(t, st, "?actor=totp@shop.example&limit=500")
	var actions []string
	for _, e := range rows {
		actions = append(actions, e["action"].(string))
	}
	if got := strings.Join(actions, ","); !strings.Contains(got, "totp.enrol") || !strings.Contains(got, "login.failed") {
		t.Errorf("audit of the merchant: %s", got)
	}
}
