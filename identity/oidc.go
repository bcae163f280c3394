// Package identity is who a shopper is: the shop's OpenID Connect
// provider (OIDC), built-in accounts with a verified email (Accounts) and
// their passkeys (Passkeys). Each hands sessions a User whose id binds the
// per-user cap to a person rather than to a sign-in; sessions turns it
// into a session token and checks tokens on every request.
package identity

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sessions"
)

// OIDCConfig names the shop's OpenID Connect provider and this client.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// Audience is the aud that API clients' bearer tokens must carry
	// (default ClientID).
	Audience string
	// RedirectURL is this deployment's /auth/oidc/callback, as the
	// provider knows it.
	RedirectURL string
	// Client makes the requests to the provider (default: a client with
	// a 10 s timeout).
	Client *http.Client
}

// OIDC is the shop's OpenID Connect provider, seen from Seckill as its
// relying party: browsers sign in with the authorization code flow (PKCE,
// state, nonce), API clients send the provider's JWTs, checked against its
// key set. go-oidc checks the claims (iss, aud, exp, and nbf with 5
// minutes of leeway); the key set is ours, to refetch on an unknown key at
// most every 10 s and to tell a provider that is down from a bad token.
type OIDC struct {
	issuer string
	// bearer checks API clients' tokens (aud: the audience); login the ID
	// tokens of the code flow (aud: the client id).
	bearer, login *oidc.IDTokenVerifier
	oauth         oauth2.Config
	client        *http.Client
	keys          *keySet
}

// Algorithms are the signatures accepted from the provider; HS256 and none
// never are.
var Algorithms = []string{oidc.RS256, oidc.ES256}

// ErrProviderDown is the provider unreachable when a token needs a key
// not yet known (503: tokens of known keys keep working).
var ErrProviderDown = seckill.Errorf(seckill.CodeUnavailable, "The sign-in provider cannot be reached just now; retry shortly.")

// NewOIDC discovers the provider at cfg.Issuer.
func NewOIDC(ctx context.Context, cfg OIDCConfig, now func() time.Time) (*OIDC, error) {
	client := cfg.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("identity: discover the OpenID Connect provider %s: %w", cfg.Issuer, err)
	}
	var meta struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKS == "" {
		return nil, fmt.Errorf("identity: the provider %s names no jwks_uri", cfg.Issuer)
	}
	aud := cfg.Audience
	if aud == "" {
		aud = cfg.ClientID
	}
	keys := newKeySet(meta.JWKS, client, now)
	verifier := func(aud string) *oidc.IDTokenVerifier {
		return oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{ClientID: aud, SupportedSigningAlgs: Algorithms, Now: now})
	}
	ep := provider.Endpoint()
	// Client credentials in the form body: every provider takes them
	// there, some only there.
	ep.AuthStyle = oauth2.AuthStyleInParams
	return &OIDC{
		issuer: cfg.Issuer, bearer: verifier(aud), login: verifier(cfg.ClientID), client: client, keys: keys,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: ep, RedirectURL: cfg.RedirectURL,
			Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
		},
	}, nil
}

// UserID is the user id of the provider's subject sub: "o_" and the first
// 26 characters of base32(SHA-256(iss + "\n" + sub)), lowercase. The same
// person is the same user on every device, session and server.
func UserID(iss, sub string) string {
	h := sha256.Sum256([]byte(iss + "\n" + sub))
	return "o_" + strings.ToLower(base32.StdEncoding.EncodeToString(h[:]))[:26]
}

// Verify checks an API client's bearer token (a sessions.Provider).
func (o *OIDC) Verify(ctx context.Context, raw string) (sessions.User, time.Time, error) {
	return o.verify(ctx, o.bearer, raw, "")
}

func (o *OIDC) verify(ctx context.Context, v *oidc.IDTokenVerifier, raw, nonce string) (sessions.User, time.Time, error) {
	var fetch fetchResult
	tok, err := v.Verify(withFetchResult(ctx, &fetch), raw)
	var expired *oidc.TokenExpiredError
	switch {
	case err != nil && fetch.err != nil:
		return sessions.User{}, time.Time{}, ErrProviderDown
	case errors.As(err, &expired):
		return sessions.User{}, time.Time{}, sessions.ErrExpired
	case err != nil, tok.Subject == "", nonce != "" && tok.Nonce != nonce:
		return sessions.User{}, time.Time{}, sessions.ErrBadToken
	}
	var cl struct {
		Name          string `json:"name"`
		Username      string `json:"preferred_username"`
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
	}
	if err := tok.Claims(&cl); err != nil {
		return sessions.User{}, time.Time{}, sessions.ErrBadToken
	}
	u := sessions.User{ID: UserID(tok.Issuer, tok.Subject), Name: displayName(cl.Name, cl.Username, cl.Email), Verified: cl.EmailVerified == true || cl.EmailVerified == "true"}
	if !tok.IssuedAt.IsZero() {
		u.IssuedAt = tok.IssuedAt.Unix()
	}
	return u, tok.Expiry, nil
}

// displayName is the first of names fit to show, else "shopper".
func displayName(names ...string) string {
	for _, n := range names {
		n = strings.TrimSpace(n)
		if seckill.CheckText(n, seckill.MaxShopperName) == "" {
			return n
		}
	}
	return "shopper"
}

// A Login is a browser's sign-in under way: what its callback needs.
type Login struct {
	State, Nonce, Verifier string
	// Next is where the browser goes once signed in (a path here).
	Next string
}

// Begin starts a browser's sign-in: the provider's URL to send it to and
// what its callback checks (kept by the caller, tied to the browser).
func (o *OIDC) Begin(next string) (string, Login) {
	l := Login{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Next: next}
	return o.oauth.AuthCodeURL(l.State, oauth2.S256ChallengeOption(l.Verifier), oidc.Nonce(l.Nonce)), l
}

// ErrLoginFailed is a callback the provider did not vouch for (a code
// refused, an ID token that does not check out).
var ErrLoginFailed = seckill.Errorf(seckill.CodeUnauthenticated, "The sign-in with the provider did not succeed; try again.")

// Finish completes a browser's sign-in with the code the provider sent
// back: the code is exchanged (with the PKCE verifier) and the ID token
// checked, its nonce included.
func (o *OIDC) Finish(ctx context.Context, l Login, code string) (sessions.User, error) {
	tok, err := o.oauth.Exchange(oidc.ClientContext(ctx, o.client), code, oauth2.VerifierOption(l.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return sessions.User{}, ErrLoginFailed
		}
		return sessions.User{}, ErrProviderDown
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return sessions.User{}, ErrLoginFailed
	}
	u, _, err := o.verify(ctx, o.login, raw, l.Nonce)
	if seckill.CodeOf(err) == seckill.CodeUnauthenticated {
		return sessions.User{}, ErrLoginFailed
	}
	return u, err
}
