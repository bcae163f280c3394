package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/identity/identitytest"
	"github.com/seckill/seckill/system/servertest"
)

// identityStack is a server offering the provider's sign-in and built-in
// accounts (their mail caught by mb), and guests only if guest is set.
type identityStack struct {
	*stack
	p  *identitytest.Provider
	mb *identitytest.Mailbox
}

func newIdentityStack(t *testing.T, guest bool, overrides ...string) *identityStack {
	t.Helper()
	p := identitytest.NewProvider(t)
	mb := identitytest.NewMailbox(t)
	sources := "oidc,accounts"
	if guest {
		sources += ",guest"
	}
	st := newStack(t, append([]string{
		"SECKILL_IDENTITY=" + sources, "SECKILL_OIDC_ISSUER=" + p.Issuer(), "SECKILL_OIDC_CLIENT_ID=" + p.ClientID(),
		"SECKILL_OIDC_CLIENT_SECRET=" + p.ClientSecret(), "SECKILL_SMTP_ADDR=" + mb.Addr,
		"SECKILL_PUBLIC_URL=http://localhost:8080",
	}, overrides...)...)
	return &identityStack{stack: st, p: p, mb: mb}
}

// signUp opens an account and returns its session token.
func (st *identityStack) signUp(t *testing.T, email string) string {
	t.Helper()
	r := call(t, st.h, "POST", "/api/accounts", map[string]any{"email": email, "password": "correct horse battery"})
	if r.Status != http.StatusCreated || r.Body["verified"] != false {
		t.Fatalf("sign up %s: %v", email, r)
	}
	return r.Body["token"].(string)
}

// TestIdentitySources: GET /api/identity names what the deployment
// offers; guest sign-in is refused (403) where guest is off.
func TestIdentitySources(t *testing.T) {
	st := newIdentityStack(t, false)
	r := call(t, st.h, "GET", "/api/identity", nil)
	if r.Status != 200 || fmt.Sprint(r.Body["sources"]) != "[oidc accounts]" || r.Body["oidc_login"] != "/auth/oidc/login" || r.Body["passkeys"] != true {
		t.Errorf("identity: %v", r)
	}
	if r := call(t, st.h, "POST", "/api/session", map[string]any{"name": "scalper"}); r.Status != 403 || r.code() != "forbidden" {
		t.Errorf("guest session with guest off: %v", r)
	}
	plain := newStack(t) // the test default: guest only
	r = call(t, plain.h, "GET", "/api/identity", nil)
	if fmt.Sprint(r.Body["sources"]) != "[guest]" || r.Body["oidc_login"] != nil {
		t.Errorf("identity of a guest deployment: %v", r)
	}
	if r := call(t, plain.h, "GET", "/auth/oidc/login", nil); r.Status != 404 {
		t.Errorf("oidc login without a provider: %v", r)
	}
	if r := call(t, plain.h, "POST", "/api/accounts", map[string]any{"email": "a@example.com", "password": "0123456789"}); r.Status != 403 {
		t.Errorf("sign-up without accounts: %v", r)
	}
}

// TestScalperGetsOneUnitPerIdentity: the scalper of issue 20, with a
// per-user limit of 1, against each source: 200 tokens of one provider
// subject, 200 sign-ins of one account, 200 sign-ups from one IP. The
// cap holds at 1 unit per person; sign-ups past the limit get 429.
func TestScalperGetsOneUnitPerIdentity(t *testing.T) {
	st := newIdentityStack(t, false)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 200, Limit: 1})
	buyAll := func(tokens []string) map[string]int {
		got := map[string]int{}
		for i, tok := range tokens {
			r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("scalp-%s-%d", servertest.Unique(), i)), bearer(tok))
			got[fmt.Sprint(r.Status, " ", r.code())]++
		}
		return got
	}

	// One subject of the provider, 200 tokens (each a new sign-in).
	var tokens []string
	for i := range 200 {
		c := st.p.Claims("scalper")
		c["iat"] = time.Now().Unix() - int64(i) // each token distinct
		c["jti"] = fmt.Sprint(i)
		tokens = append(tokens, st.p.Sign(t, st.p.Key(), c))
	}
	if got := buyAll(tokens); got["200 "] != 1 || got["409 limit_exceeded"] != 199 {
		t.Errorf("200 tokens of one subject: %v", got)
	}

	// One account, 200 sign-ins: the sign-in limit (20 a minute per IP)
	// stops most; each that passes is the same user.
	st.signUp(t, "scalper@example.com")
	tokens = tokens[:0]
	signIns := map[int]int{}
	for range 200 {
		r := call(t, st.h, "POST", "/api/session", map[string]any{"email": "Scalper+x@Example.com ", "password": "correct horse battery"})
		signIns[r.Status]++
		if r.Status == 200 {
			tokens = append(tokens, r.Body["token"].(string))
		}
	}
	// (A token more may refill while the loop runs: 20 a minute.)
	if signIns[200] < 20 || signIns[200] > 21 || signIns[200]+signIns[429] != 200 {
		t.Errorf("200 sign-ins of one account: %v, want 20 and then 429", signIns)
	}
	if got := buyAll(tokens); got["200 "] != 1 || got["409 limit_exceeded"] != len(tokens)-1 {
		t.Errorf("the account's sign-ins bought: %v", got)
	}

	// 200 sign-ups from one IP: 5 a minute (one spent above), then 429.
	ups := map[int]int{}
	for i := range 200 {
		r := call(t, st.h, "POST", "/api/accounts", map[string]any{"email": fmt.Sprintf("bot%d@example.com", i), "password": "0123456789ab"})
		ups[r.Status]++
	}
	if ups[201] != 4 || ups[429] != 196 {
		t.Errorf("200 sign-ups from one IP: %v, want 4 more and then 429", ups)
	}
	v := call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d", sale.ID), nil)
	if num(v.Body, "remaining") != 198 {
		t.Errorf("remaining %d, want 198 (one unit per identity)", num(v.Body, "remaining"))
	}
}

// TestProviderBearerTokens: the provider's tokens work on shopper routes;
// a bad one gets 401 and buys nothing.
func TestProviderBearerTokens(t *testing.T) {
	st := newIdentityStack(t, false)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 5, Limit: 5})
	good := st.p.Sign(t, st.p.Key(), st.p.Claims("alice"))
	r := call(t, st.h, "GET", "/api/session", nil, bearer(good))
	if r.Body["signed_in"] != true || r.Body["user_id"] != identity.UserID(st.p.Issuer(), "alice") || r.Body["verified"] != true {
		t.Fatalf("session of a provider token: %v", r)
	}
	wrongAud := st.p.Claims("alice")
	wrongAud["aud"] = "someone-else"
	for name, tok := range map[string]string{
		"wrong audience": st.p.Sign(t, st.p.Key(), wrongAud),
		"alg none":       identitytest.Unsigned(t, st.p.Claims("alice")),
	} {
		if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "bad-token-"+servertest.Unique()), bearer(tok)); r.Status != 401 || r.code() != "unauthenticated" {
			t.Errorf("%s: %v", name, r)
		}
	}
	if r := call(t, st.h, "GET", fmt.Sprintf("/api/sales/%d", sale.ID), nil); num(r.Body, "remaining") != 5 {
		t.Errorf("refused tokens changed the stock: %v", r)
	}
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "good-token-1"), bearer(good)); r.Status != 200 {
		t.Errorf("buy with a provider token: %v", r)
	}
}

// TestAccountLifecycle: sign up, the mail's link verifies once, sign in,
// and the answers to hostile input.
func TestAccountLifecycle(t *testing.T) {
	st := newIdentityStack(t, false, "SECKILL_RATE_SIGNUP_PER_IP=0", "SECKILL_RATE_SIGNIN_PER_IP=0")
	tok := st.signUp(t, " Ada+shop@Example.COM")
	r := call(t, st.h, "GET", "/api/session", nil, bearer(tok))
	if r.Body["verified"] != false || !strings.HasPrefix(r.Body["user_id"].(string), "a_") {
		t.Fatalf("new account's session: %v", r)
	}
	// The normalised email is taken, in any spelling.
	for _, e := range []string{"ada@example.com", "ADA+other@example.com"} {
		if r := call(t, st.h, "POST", "/api/accounts", map[string]any{"email": e, "password": "0123456789ab"}); r.Status != 409 || r.code() != "email_taken" {
			t.Errorf("sign-up %s: %v", e, r)
		}
	}
	link := st.mb.Token(t, "ada@example.com", 1)

	// Another account signed in may not spend it; nothing changes.
	other := st.signUp(t, "eve@example.com")
	if r := call(t, st.h, "POST", "/api/accounts/verify", map[string]any{"token": link}, bearer(other)); r.Status != 403 {
		t.Errorf("verify another account's link: %v", r)
	}
	r = call(t, st.h, "POST", "/api/accounts/verify", map[string]any{"token": link}, bearer(tok))
	if r.Status != 200 || r.Body["verified"] != true || r.Body["token"] == nil {
		t.Fatalf("verify: %v", r)
	}
	fresh := r.Body["token"].(string)
	if r := call(t, st.h, "GET", "/api/session", nil, bearer(fresh)); r.Body["verified"] != true {
		t.Errorf("session after verifying: %v", r)
	}
	if r := call(t, st.h, "POST", "/api/accounts/verify", map[string]any{"token": link}); r.Status != 400 {
		t.Errorf("a link used twice: %v", r)
	}
	// Eve's link, expired in the ledger: refused, eve stays unverified.
	eveLink := st.mb.Token(t, "eve@example.com", 1)
	if _, err := st.DB.Exec(`UPDATE account_tokens SET expires_at = ? WHERE account_id = (SELECT id FROM accounts WHERE email = ?)`,
		time.Now().Add(-time.Minute).UTC(), "eve@example.com"); err != nil {
		t.Fatal(err)
	}
	if r := call(t, st.h, "POST", "/api/accounts/verify", map[string]any{"token": eveLink}); r.Status != 400 {
		t.Errorf("an expired link: %v", r)
	}
	r = call(t, st.h, "POST", "/api/session", map[string]any{"email": "eve@example.com", "password": "correct horse battery"})
	if r.Status != 200 || r.Body["verified"] != false {
		t.Errorf("eve after the expired link: %v", r)
	}

	// Sign-in: the account's password works under any spelling of its
	// email; a wrong password and an unknown email get the same answer.
	r = call(t, st.h, "POST", "/api/session", map[string]any{"email": "ADA@example.com", "password": "correct horse battery"})
	if r.Status != 200 || r.Body["verified"] != true {
		t.Errorf("sign in: %v", r)
	}
	wrong := call(t, st.h, "POST", "/api/session", map[string]any{"email": "ada@example.com", "password": "correct horse battery!"})
	unknown := call(t, st.h, "POST", "/api/session", map[string]any{"email": "nobody@example.com", "password": "correct horse battery"})
	if wrong.Status != 401 || wrong.Raw != unknown.Raw || wrong.Status != unknown.Status {
		t.Errorf("wrong password %v, unknown email %v: want the same 401", wrong, unknown)
	}

	// Hostile input: each a 400 (or 401 for sign-in), no account made.
	long := strings.Repeat("a", 250) + "@example.com"
	for name, body := range map[string]string{
		"overlong email":    fmt.Sprintf(`{"email":%q,"password":"0123456789ab"}`, long),
		"control in email":  `{"email":"a\u0007b@example.com","password":"0123456789ab"}`,
		"newline in email":  `{"email":"a@example.com\r\nBcc: x@evil.example","password":"0123456789ab"}`,
		"no at":             `{"email":"example.com","password":"0123456789ab"}`,
		"only a tag":        `{"email":"+tag@example.com","password":"0123456789ab"}`,
		"short password":    `{"email":"short@example.com","password":"012345678"}`,
		"overlong password": fmt.Sprintf(`{"email":"long@example.com","password":%q}`, strings.Repeat("p", 257)),
		"control password":  `{"email":"ctl@example.com","password":"0123456789\u0000ab"}`,
		"mis-cased key":     `{"Email":"case@example.com","password":"0123456789ab"}`,
		"duplicated key":    `{"email":"dup@example.com","email":"dup2@example.com","password":"0123456789ab"}`,
		"unknown key":       `{"email":"unk@example.com","password":"0123456789ab","verified":true}`,
		"number email":      `{"email":7,"password":"0123456789ab"}`,
	} {
		if r := call(t, st.h, "POST", "/api/accounts", body); r.Status != 400 || r.code() != "invalid_request" {
			t.Errorf("%s: %v", name, r)
		}
	}
	var n int
	if err := st.DB.Get(&n, `SELECT COUNT(*) FROM accounts`); err != nil || n != 2 {
		t.Errorf("accounts: %d (%v), want the 2 signed up", n, err)
	}
	for name, body := range map[string]string{
		"name and password": `{"name":"x","email":"ada@example.com","password":"correct horse battery"}`,
		"mis-cased":         `{"Email":"ada@example.com","password":"correct horse battery"}`,
		"email alone":       `{"email":"ada@example.com"}`,
	} {
		if r := call(t, st.h, "POST", "/api/session", body); r.Status != 400 {
			t.Errorf("sign-in %s: %v", name, r)
		}
	}
	for name, body := range map[string]string{
		"empty token":    `{"token":""}`,
		"made-up token":  `{"token":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`,
		"overlong token": fmt.Sprintf(`{"token":%q}`, strings.Repeat("A", 500)),
		"mis-cased key":  fmt.Sprintf(`{"Token":%q}`, eveLink),
	} {
		if r := call(t, st.h, "POST", "/api/accounts/verify", body); r.Status != 400 {
			t.Errorf("verify %s: %v", name, r)
		}
	}
}

// TestVerifiedOnlySale: a verified_only sale sells to verified identities
// only; the refusals are counted in its stats.
func TestVerifiedOnlySale(t *testing.T) {
	st := newIdentityStack(t, true)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 10, Limit: 2, VerifiedOnly: true})
	guest := call(t, st.h, "POST", "/api/session", map[string]any{"name": "guest"}).Body["token"].(string)
	unverified := st.signUp(t, "new@example.com")
	c := st.p.Claims("unverified")
	c["email_verified"] = false
	oidcUnverified := st.p.Sign(t, st.p.Key(), c)
	for name, tok := range map[string]string{"guest": guest, "account not verified": unverified, "provider, email not verified": oidcUnverified} {
		if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "vo-"+servertest.Unique()), bearer(tok)); r.Status != 403 || r.code() != "not_eligible" {
			t.Errorf("%s: %v", name, r)
		}
	}
	link := st.mb.Token(t, "new@example.com", 1)
	verified := call(t, st.h, "POST", "/api/accounts/verify", map[string]any{"token": link}, bearer(unverified)).Body["token"].(string)
	// The session from before the email was confirmed counts too (the
	// account is looked at again), as does the one the link gave.
	if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "vo-"+servertest.Unique()), bearer(unverified)); r.Status != 200 {
		t.Errorf("the session from before confirming: %v", r)
	}
	for name, tok := range map[string]string{"verified account": verified, "provider, verified": st.p.Sign(t, st.p.Key(), st.p.Claims("v"))} {
		if r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "vo-"+servertest.Unique()), bearer(tok)); r.Status != 200 {
			t.Errorf("%s: %v", name, r)
		}
	}
	// The merchant turns it off: the guest buys.
	if r := call(t, st.h, "PATCH", fmt.Sprintf("/admin/api/sales/%d", sale.ID), map[string]any{"verified_only": false}, admin()); r.Status != 200 || r.Body["verified_only"] != false {
		t.Fatalf("patch: %v", r)
	}
	servertest.WaitFor(t, 5*time.Second, "the change applies", func() (bool, string) {
		r := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, "vo-guest-after"), bearer(guest))
		return r.Status == 200, r.String()
	})
	servertest.FlushOutcomes(t, st.srv)
	r := call(t, st.h, "GET", fmt.Sprintf("/admin/api/sales/%d/stats", sale.ID), nil, admin())
	// Three refusals above, and the guest's while the change spread.
	if o, _ := r.Body["outcomes"].(map[string]any); num(o, "not_eligible") < 3 {
		t.Errorf("stats outcomes: %v", r.Body["outcomes"])
	}
}

// TestProviderLoginFlow: the browser login through the provider, and
// the callbacks it must refuse: no or another browser's state, a replay,
// a made-up code; next is kept to this site.
func TestProviderLoginFlow(t *testing.T) {
	st := newIdentityStack(t, false)
	st.p.QueueUser("flow-user", "flow@example.com", true)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	begin := func(next string) (state, cookie, callback string) {
		t.Helper()
		r := call(t, st.h, "GET", "/auth/oidc/login?next="+url.QueryEscape(next), nil)
		loc, err := url.Parse(r.Header.Get("Location"))
		if r.Status != 302 || err != nil || loc.Query().Get("code_challenge_method") != "S256" || loc.Query().Get("nonce") == "" {
			t.Fatalf("login: %v %s", r, r.Header.Get("Location"))
		}
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			if c.Name == "sk_oidc" {
				cookie = c.Value
			}
		}
		res, err := noRedirect.Get(loc.String()) // the provider signs the user in at once
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		back, err := url.Parse(res.Header.Get("Location"))
		if err != nil || back.Query().Get("code") == "" {
			t.Fatalf("provider answered %s %s", res.Status, res.Header.Get("Location"))
		}
		return loc.Query().Get("state"), cookie, "/auth/oidc/callback?" + back.RawQuery
	}
	state, cookie, callback := begin("/#/sales/7")
	if cookie != state {
		t.Fatalf("cookie %q, state %q", cookie, state)
	}
	if r := call(t, st.h, "GET", callback, nil); r.Status != 403 {
		t.Errorf("callback without the browser's cookie: %v", r)
	}
	if r := call(t, st.h, "GET", callback, nil, "Cookie: sk_oidc=someone-elses-state"); r.Status != 403 {
		t.Errorf("callback with another state: %v", r)
	}
	// A browser is sent back to the shopper page, which shows why.
	if r := call(t, st.h, "GET", callback, nil, "Accept: text/html"); r.Status != 302 || !strings.HasPrefix(r.Header.Get("Location"), "/?signin_error=") {
		t.Errorf("a browser's refused callback: %v %s", r, r.Header.Get("Location"))
	}
	r := call(t, st.h, "GET", callback, nil, "Cookie: sk_oidc="+cookie)
	if r.Status != 302 || r.Header.Get("Location") != "/#/sales/7" {
		t.Fatalf("callback: %v %s", r, r.Header.Get("Location"))
	}
	var session string
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "sk_session" {
			session = c.Value
		}
	}
	who := call(t, st.h, "GET", "/api/session", nil, "Cookie: sk_session="+session)
	if who.Body["user_id"] != identity.UserID(st.p.Issuer(), "flow-user") || who.Body["verified"] != true {
		t.Errorf("signed in as %v", who)
	}
	if r := call(t, st.h, "GET", callback, nil, "Cookie: sk_oidc="+cookie); r.Status != 401 {
		t.Errorf("the callback replayed: %v", r)
	}
	// A made-up code with a good state: the provider refuses it.
	_, cookie, callback = begin("/")
	forged := strings.Replace(callback, "code=", "code=x", 1)
	if r := call(t, st.h, "GET", forged, nil, "Cookie: sk_oidc="+cookie); r.Status != 401 {
		t.Errorf("a made-up code: %v", r)
	}
	// next elsewhere than this site becomes "/".
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "/./\\evil.example",
		"/a/../\\evil.example", "/a/../b", "javascript:alert(1)", "/ok\r\nSet-Cookie: x=1"} {
		_, cookie, callback := begin(next)
		if r := call(t, st.h, "GET", callback, nil, "Cookie: sk_oidc="+cookie); r.Status != 302 || r.Header.Get("Location") != "/" {
			t.Errorf("next %q: %v %s", next, r, r.Header.Get("Location"))
		}
	}
}
