// Package sessions knows who is signed in. Shoppers carry signed session
// tokens (HS256 JWTs), verified once and then kept in a bounded cache,
// and revoked everywhere when their user signs out; the sign-outs live in
// Redis with a copy in every process's memory. Merchants sign in to the
// admin panel with the admin password (a session in Redis) or send the
// admin token.
package sessions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill"
)

// Claims are the claims of a shopper's session token (HS256). Anyone with
// the signing secret can mint one: sub is the user id, name the display
// name, verified whether the identity behind it is verified (a verified
// account, or a provider's email_verified).
type Claims struct {
	Name     string `json:"name"`
	Verified bool   `json:"verified,omitempty"`
	jwt.RegisteredClaims
}

// UnmarshalJSON refuses times (exp, iat, nbf) that are not JSON numbers,
// as RFC 7519 has them; the jwt library would read "exp":"1999999999".
func (c *Claims) UnmarshalJSON(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return errors.New("claims are not a JSON object")
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch name := tok.String(); name {
		case "exp", "iat", "nbf":
			if dec.PeekKind() != '0' {
				return fmt.Errorf("claim %s is not a number", name)
			}
		}
		if err := dec.SkipValue(); err != nil {
			return err
		}
	}
	type plain Claims // without this method
	return json.Unmarshal(b, (*plain)(c))
}

// User is a signed-in shopper.
type User struct {
	ID   string
	Name string
	// Verified is whether the identity is verified: a built-in account
	// whose email was confirmed, or a provider's user with email_verified.
	// Guests never are.
	Verified bool
	// IssuedAt is when the token was issued (unix seconds; 0 when the
	// token does not say).
	IssuedAt int64
}

// MintToken signs a session token for a user, valid for ttl. Load testers
// use the same function with the same secret.
func MintToken(secret []byte, userID, name string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	return mint(secret, User{ID: userID, Name: name}, ttl, now)
}

func mint(secret []byte, u User, ttl time.Duration, now time.Time) (string, time.Time, error) {
	exp := now.Add(ttl).Truncate(time.Second)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{
		Name: u.Name, Verified: u.Verified,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   u.ID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	})
	signed, err := tok.SignedString(secret)
	return signed, exp, err
}

// failed wraps an error of Redis doing op: any is the backing service's
// (503), for what these records serve cannot be done without them.
func failed(op string, err error) error {
	return fmt.Errorf("sessions: %s: %w: %w", op, seckill.ErrUnavailable, err)
}

// Why a token is refused; each is an unauthenticated refusal with its
// message for the shopper.
var (
	ErrNoToken   = seckill.Errorf(seckill.CodeUnauthenticated, "Sign in first: no session token.")
	ErrBadToken  = seckill.Errorf(seckill.CodeUnauthenticated, "Your session token is not valid; sign in again.")
	ErrExpired   = seckill.Errorf(seckill.CodeUnauthenticated, "Your session has expired; sign in again.")
	ErrSignedOut = seckill.Errorf(seckill.CodeUnauthenticated, "You signed out; sign in again.")
)

// verify checks a session token's signature and claims on the clock now.
func (s *Shoppers) verify(raw string) (User, time.Time, error) {
	var cl Claims
	_, err := s.parser.ParseWithClaims(raw, &cl, func(*jwt.Token) (any, error) { return s.secret, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return User{}, time.Time{}, ErrExpired
	case err != nil, !seckill.ValidUserID(cl.Subject):
		return User{}, time.Time{}, ErrBadToken
	}
	u := User{ID: cl.Subject, Name: cl.Name, Verified: cl.Verified}
	if cl.IssuedAt != nil {
		u.IssuedAt = cl.IssuedAt.Unix()
	}
	return u, cl.ExpiresAt.Time, nil
}

// tokenCache keeps the users of session tokens verified lately, keyed by
// the whole token (nothing shorter: a collision would hand one user's
// session to another), until each token's expiry. Verifying an HS256 token
// and decoding its claims costs several times a cache lookup, on every
// request of a flash sale. It is bounded: a full shard starts afresh.
type tokenCache struct {
	seed   maphash.Seed
	shards [32]tokenShard
}

type tokenShard struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	user User
	exp  time.Time
}

// tokenCacheSize bounds the tokens kept (about 300 bytes each).
const tokenCacheSize = 100_000

func newTokenCache() *tokenCache {
	c := &tokenCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = map[string]cachedToken{}
	}
	return c
}

func (c *tokenCache) shard(raw string) *tokenShard {
	return &c.shards[maphash.String(c.seed, raw)%uint64(len(c.shards))]
}

func (c *tokenCache) get(raw string, now time.Time) (User, bool) {
	sh := c.shard(raw)
	sh.mu.Lock()
	t, ok := sh.m[raw]
	sh.mu.Unlock()
	if !ok || !now.Before(t.exp) {
		return User{}, false
	}
	return t.user, true
}

func (c *tokenCache) put(raw string, u User, exp time.Time) {
	sh := c.shard(raw)
	sh.mu.Lock()
	if len(sh.m) >= tokenCacheSize/len(c.shards) {
		clear(sh.m)
	}
	sh.m[raw] = cachedToken{user: u, exp: exp}
	sh.mu.Unlock()
}

// hs256Header is the header of every session token, as jwt writes it.
var hs256Header = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "."

// sessionToken reports whether raw is one for the HS256 check: a session
// token's header, or any HS* algorithm (refused there unless HS256 with
// the secret). Any other token is the provider's, which accepts only
// RS256 and ES256.
func sessionToken(raw string) bool {
	if strings.HasPrefix(raw, hs256Header) {
		return true
	}
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	return json.Unmarshal(b, &h) == nil && strings.HasPrefix(h.Alg, "HS")
}
