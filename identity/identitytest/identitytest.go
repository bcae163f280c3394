// Package identitytest runs, on loopback, the identity peers tests need:
// a real OpenID Connect provider (mockoidc: discovery, authorization code
// with PKCE, ID tokens, JWKS) whose key set the test controls (rotation,
// an ES256 key, an outage), and an SMTP server that keeps what it gets.
package identitytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/seckill/seckill/identity/mailbox"
)

// Provider is an OpenID Connect provider on loopback.
type Provider struct {
	m *mockoidc.MockOIDC

	mu   sync.Mutex
	keys []*Key // published in the JWKS

	down atomic.Bool
	// JWKSFetches counts the requests for the key set.
	JWKSFetches atomic.Int64
}

// Key is a signing key of the provider (or one it never published).
type Key struct {
	ID     string
	Alg    jose.SignatureAlgorithm
	signer jose.Signer
	public jose.JSONWebKey
}

// NewProvider starts a provider until the test ends. Its own key (which
// signs the ID tokens of its code flow) is published; AddKey publishes
// more.
func NewProvider(t testing.TB) *Provider {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{m: m}
	kid, err := m.Keypair.KeyID()
	if err != nil {
		t.Fatal(err)
	}
	p.keys = []*Key{newKey(t, kid, jose.RS256, m.Keypair.PrivateKey)}
	err = m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != mockoidc.JWKSEndpoint {
				next.ServeHTTP(w, r)
				return
			}
			p.JWKSFetches.Add(1)
			if p.down.Load() {
				http.Error(w, "key set unavailable", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(p.jwks())
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return p
}

func newKey(t testing.TB, kid string, alg jose.SignatureAlgorithm, priv any) *Key {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: priv},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	var pub any
	switch k := priv.(type) {
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	}
	return &Key{ID: kid, Alg: alg, signer: signer, public: jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(alg), Use: "sig"}}
}

// Public is the key's public half.
func (k *Key) Public() any { return k.public.Key }

// NewKey makes a key of alg (RS256 or ES256) with id kid, not published.
func NewKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) *Key {
	t.Helper()
	var priv any
	var err error
	if alg == jose.ES256 {
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	return newKey(t, kid, alg, priv)
}

// Publish adds k to the key set (a rotation).
func (p *Provider) Publish(k *Key) {
	p.mu.Lock()
	p.keys = append(p.keys, k)
	p.mu.Unlock()
}

// Retire drops k from the key set.
func (p *Provider) Retire(k *Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, have := range p.keys {
		if have == k {
			p.keys = append(p.keys[:i], p.keys[i+1:]...)
			return
		}
	}
}

func (p *Provider) jwks() jose.JSONWebKeySet {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := jose.JSONWebKeySet{}
	for _, k := range p.keys {
		set.Keys = append(set.Keys, k.public)
	}
	return set
}

// SetDown makes the key set answer 503 (true) or work again.
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.m.Issuer() }

// ClientID and ClientSecret are the client the provider knows.
func (p *Provider) ClientID() string     { return p.m.ClientID }
func (p *Provider) ClientSecret() string { return p.m.ClientSecret }

// Key is the provider's own key (the one its code flow signs with).
func (p *Provider) Key() *Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[0]
}

// Claims are valid claims of an API client's token for sub: this issuer,
// the client as audience, an hour to live, email verified.
func (p *Provider) Claims(sub string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": p.Issuer(), "aud": p.ClientID(), "sub": sub, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "email": sub + "@example.com", "email_verified": true, "name": sub,
	}
}

// Sign signs claims with k.
func (p *Provider) Sign(t testing.TB, k *Key, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := k.signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Unsigned is claims in a token with "alg": "none".
func Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(b) + "."
}

// QueueUser makes the next sign-in at the provider's login page sign in
// sub (by default mockoidc's "jane.doe").
func (p *Provider) QueueUser(sub, email string, verified bool) {
	p.m.QueueUser(&mockoidc.MockUser{Subject: sub, Email: email, EmailVerified: verified, PreferredUsername: sub})
}

// NewMailbox starts an SMTP server on loopback that keeps every mail it
// gets, until the test ends.
func NewMailbox(t testing.TB) *Mailbox {
	t.Helper()
	mb, err := mailbox.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mb.Close() })
	return &Mailbox{mb}
}

// Mailbox is a mailbox.Mailbox for a test.
type Mailbox struct{ *mailbox.Mailbox }

// Token waits (up to 10 s) for the n-th mail to an address (from 1) and
// returns the verification token of its link.
func (mb *Mailbox) Token(t testing.TB, to string, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := mb.Mailbox.Token(ctx, to, n)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
