package identity_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/identity/identitytest"
)

// clock is a test clock the key set's rate limit and the claims' checks
// both read.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newOIDC(t *testing.T, p *identitytest.Provider, clk *clock) *identity.OIDC {
	t.Helper()
	o, err := identity.NewOIDC(context.Background(), identity.OIDCConfig{
		Issuer: p.Issuer(), ClientID: p.ClientID(), ClientSecret: p.ClientSecret(), RedirectURL: "http://localhost/cb",
	}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestUserIDFromIssuerAndSubject: the user id is API.md's derivation, the
// same for the same issuer and subject, another for another issuer.
func TestUserIDFromIssuerAndSubject(t *testing.T) {
	// base32(SHA-256("https://id.example\nalice")), first 26, lowercase
	// (computed apart, with Python's hashlib and base64).
	const want = "o_" + "grlzjyn24brcnguhs2ttcpn62x"
	id := identity.UserID("https://id.example", "alice")
	if id != want || !seckill.ValidUserID(id) {
		t.Fatalf("user id %q, want %q", id, want)
	}
	if identity.UserID("https://id.example", "alice") != id || identity.UserID("https://other.example", "alice") == id ||
		identity.UserID("https://id.example", "alice2") == id {
		t.Error("the user id is not a function of issuer and subject alone")
	}
}

// TestTokenBattery: every kind of bad bearer token is refused with 401
// (503 only when a new key is needed and the provider is down), good
// ones pass, a rotated key works without a restart, and unknown keys cost
// the provider at most one fetch in 10 s.
func TestTokenBattery(t *testing.T) {
	p := identitytest.NewProvider(t)
	clk := &clock{t: time.Now()}
	o := newOIDC(t, p, clk)
	ctx := context.Background()
	verify := func(raw string) (string, seckill.Code) {
		u, _, err := o.Verify(ctx, raw)
		return u.ID, seckill.CodeOf(err)
	}
	good := p.Claims("alice")
	id, code := verify(p.Sign(t, p.Key(), good))
	if code != seckill.CodeOK || id != identity.UserID(p.Issuer(), "alice") {
		t.Fatalf("a good token: %q %s", id, code)
	}
	with := func(k string, v any) map[string]any {
		c := p.Claims("alice")
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	now := clk.Now()
	pub, err := x509.MarshalPKIXPublicKey(p.Key().Public())
	if err != nil {
		t.Fatal(err)
	}
	hsWithPublicKey := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(good))
	hsWithPublicKey.Header["kid"] = p.Key().ID
	hs, err := hsWithPublicKey.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	if err != nil {
		t.Fatal(err)
	}
	rogue := identitytest.NewKey(t, p.Key().ID, jose.RS256) // the provider's kid, another key
	bad := map[string]string{
		"wrong issuer":         p.Sign(t, p.Key(), with("iss", "https://evil.example")),
		"wrong audience":       p.Sign(t, p.Key(), with("aud", "another-client")),
		"expired":              p.Sign(t, p.Key(), with("exp", now.Add(-time.Second).Unix())),
		"no expiry":            p.Sign(t, p.Key(), with("exp", nil)),
		"not yet valid":        p.Sign(t, p.Key(), with("nbf", now.Add(6*time.Minute).Unix())),
		"no subject":           p.Sign(t, p.Key(), with("sub", nil)),
		"empty subject":        p.Sign(t, p.Key(), with("sub", "")),
		"alg none":             identitytest.Unsigned(t, good),
		"HS256 with the pub":   hs,
		"a key outside":        p.Sign(t, rogue, good),
		"garbage":              "not.a.token",
		"signature tampered":   tamper(p.Sign(t, p.Key(), good)),
		"audience in an array": p.Sign(t, p.Key(), with("aud", []string{"x", "y"})),
	}
	for name, raw := range bad {
		if id, code := verify(raw); code != seckill.CodeUnauthenticated {
			t.Errorf("%s: %q %s, want unauthenticated", name, id, code)
		}
	}
	// nbf within the 5 minutes of leeway passes; so does an audience list
	// holding the client.
	for name, c := range map[string]map[string]any{
		"nbf 4 min ahead":  with("nbf", now.Add(4*time.Minute).Unix()),
		"audience in list": with("aud", []string{"x", p.ClientID()}),
	} {
		if _, code := verify(p.Sign(t, p.Key(), c)); code != seckill.CodeOK {
			t.Errorf("%s: %s", name, code)
		}
	}

	// Made-up key ids: the key set is fetched again at most once in 10 s.
	fetches := p.JWKSFetches.Load()
	for i := range 50 {
		k := identitytest.NewKey(t, "made-up-"+string(rune('a'+i%26)), jose.ES256)
		if _, code := verify(p.Sign(t, k, good)); code != seckill.CodeUnauthenticated {
			t.Fatalf("made-up key: %s", code)
		}
		if i == 0 {
			clk.Add(11 * time.Second) // the first may fetch; none after within 10 s
			fetches = p.JWKSFetches.Load()
		}
	}
	if n := p.JWKSFetches.Load() - fetches; n > 1 {
		t.Errorf("50 unknown keys in under 10 s fetched the key set %d times, want at most 1", n)
	}

	// The provider rotates to an ES256 key: its tokens work once the set
	// may be fetched again, without a restart.
	k2 := identitytest.NewKey(t, "k2", jose.ES256)
	p.Publish(k2)
	clk.Add(11 * time.Second)
	if id, code := verify(p.Sign(t, k2, p.Claims("bob"))); code != seckill.CodeOK || id != identity.UserID(p.Issuer(), "bob") {
		t.Fatalf("rotated ES256 key: %q %s", id, code)
	}

	// The key set is down: a token of a new key gets 503, tokens of the
	// keys known keep working.
	p.SetDown(true)
	k3 := identitytest.NewKey(t, "k3", jose.RS256)
	p.Publish(k3)
	clk.Add(11 * time.Second)
	if _, code := verify(p.Sign(t, k3, good)); code != seckill.CodeUnavailable {
		t.Errorf("new key while the key set is down: %s, want unavailable", code)
	}
	if _, code := verify(p.Sign(t, k3, p.Claims("carol"))); code != seckill.CodeUnavailable {
		t.Errorf("again within 10 s: %s, want unavailable (the failure remembered)", code)
	}
	for _, k := range []*identitytest.Key{p.Key(), k2} {
		if _, code := verify(p.Sign(t, k, p.Claims("dave"))); code != seckill.CodeOK {
			t.Errorf("known key %s while the key set is down: %s", k.ID, code)
		}
	}
	if _, code := verify(tamper(p.Sign(t, k2, p.Claims("dave")))); code != seckill.CodeUnauthenticated {
		t.Errorf("a tampered token of a known key while the key set is down: %s, want unauthenticated", code)
	}
	p.SetDown(false)
	clk.Add(11 * time.Second)
	if _, code := verify(p.Sign(t, k3, good)); code != seckill.CodeOK {
		t.Errorf("new key once the key set is back: %s", code)
	}

	// The provider retires k2: its tokens stop working once the set is
	// an hour old and fetched again.
	p.Retire(k2)
	if _, code := verify(p.Sign(t, k2, p.Claims("erin"))); code != seckill.CodeOK {
		t.Errorf("a retired key before the set is stale: %s (kept until then)", code)
	}
	clk.Add(61 * time.Minute)
	later := func(sub string) map[string]any { // claims valid on the test clock
		c := p.Claims(sub)
		c["iat"], c["nbf"], c["exp"] = clk.Now().Unix(), clk.Now().Unix(), clk.Now().Add(time.Hour).Unix()
		return c
	}
	if _, code := verify(p.Sign(t, k2, later("frank"))); code != seckill.CodeUnauthenticated {
		t.Errorf("a retired key after an hour: %s, want unauthenticated", code)
	}
	if _, code := verify(p.Sign(t, k3, later("frank"))); code != seckill.CodeOK {
		t.Errorf("a key still published after an hour: %s", code)
	}
}

// tamper flips a character of a token's signature.
func tamper(raw string) string {
	i := strings.LastIndexByte(raw, '.') + 5
	b := []byte(raw)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestEmailVerifiedMakesVerified: email_verified true (a JSON boolean,
// or the string "true" as some providers send it) makes the identity
// verified; false, missing or anything else does not (and does not refuse
// the token).
func TestEmailVerifiedMakesVerified(t *testing.T) {
	p := identitytest.NewProvider(t)
	o := newOIDC(t, p, &clock{t: time.Now()})
	for v, want := range map[any]bool{true: true, false: false, "true": true, "yes": false, 1: false, nil: false} {
		c := p.Claims("erin")
		if v == nil {
			delete(c, "email_verified")
		} else {
			c["email_verified"] = v
		}
		u, _, err := o.Verify(context.Background(), p.Sign(t, p.Key(), c))
		if err != nil || u.Verified != want {
			t.Errorf("email_verified %v: verified %v, err %v", v, u.Verified, err)
		}
	}
}
