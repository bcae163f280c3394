package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oklog/ulid/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/bcrypt"

	"github.com/seckill/seckill/orders"
)

const (
	sessionCookie = "sk_session"
	adminCookie   = "sk_admin"
	ctxUser       = "user"

	maxShopperName  = 64
	adminSessionTTL = 12 * time.Hour
	adminBodyLimit  = 16 << 10
	// loginsPerSecond allows 5 admin login attempts a minute per client IP,
	// up to loginBurst at once: a merchant who mistypes can try again at
	// once, a guesser gets 5 a minute.
	loginsPerSecond = 5.0 / 60
	loginBurst      = 5
)

// Claims are the claims of a shopper's session token (HS256). Anyone with
// the signing secret can mint one: sub is the user id, name the display name.
type Claims struct {
	Name string `json:"name"`
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

// User is the authenticated shopper of a request.
type User struct {
	ID   string
	Name string
	// IssuedAt is when the session token was issued (unix seconds).
	IssuedAt int64
}

// MintToken signs a session token for a user, valid for ttl. Load testers
// and other identity providers use the same function with the same secret.
func MintToken(secret []byte, userID, name string, ttl time.Duration, now time.Time) (string, time.Time, error) {
	exp := now.Add(ttl).Truncate(time.Second)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{
		Name: name,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	})
	signed, err := tok.SignedString(secret)
	return signed, exp, err
}

// newTokenParser checks session tokens on the server's clock, which the
// token cache uses too.
func newTokenParser(now func() time.Time) *jwt.Parser {
	return jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(now))
}

// errSignedOut means the token was issued before its user signed out.
var errSignedOut = errors.New("signed out")

// parseToken verifies a session token and returns its user. A token
// verified before is taken from the cache (until it expires); whether its
// user signed out since is checked every time.
func (s *Server) parseToken(raw string) (User, error) {
	now := s.now()
	u, ok := s.tokens.get(raw, now)
	if !ok {
		var cl Claims
		_, err := s.jwt.ParseWithClaims(raw, &cl, func(*jwt.Token) (any, error) { return []byte(s.cfg.JWTSecret), nil })
		if err != nil {
			return User{}, err
		}
		if !orders.ValidUserID(cl.Subject) {
			return User{}, errors.New("bad subject")
		}
		u = User{ID: cl.Subject, Name: cl.Name}
		if cl.IssuedAt != nil {
			u.IssuedAt = cl.IssuedAt.Unix()
		}
		s.tokens.put(raw, u, cl.ExpiresAt.Time)
	}
	if s.signOuts.revoked(u.ID, u.IssuedAt) {
		return User{}, errSignedOut
	}
	return u, nil
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

func unauthenticated(msg string) *Error {
	return newError(http.StatusUnauthorized, "unauthenticated", "%s", msg)
}

// requireUser authenticates a shopper by "Authorization: Bearer <token>" or
// the session cookie.
func (s *Server) requireUser(c *gin.Context) {
	raw := sessionToken(c)
	if raw == "" {
		abort(c, unauthenticated("Sign in first: no session token."))
		return
	}
	u, err := s.parseToken(raw)
	if err != nil {
		msg := "Your session token is not valid; sign in again."
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			msg = "Your session has expired; sign in again."
		case errors.Is(err, errSignedOut):
			msg = "You signed out; sign in again."
		}
		abort(c, unauthenticated(msg))
		return
	}
	c.Set(ctxUser, u)
	c.Next()
}

// sessionToken is the request's bearer token, else its session cookie.
func sessionToken(c *gin.Context) string {
	if raw, ok := bearer(c); ok {
		return raw
	}
	raw, _ := c.Cookie(sessionCookie)
	return raw
}

func currentUser(c *gin.Context) User {
	u, _ := c.Get(ctxUser)
	return u.(User)
}

func bearer(c *gin.Context) (string, bool) {
	h := c.GetHeader("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

type sessionRequest struct {
	Name string `json:"name"`
}

// createSession signs a shopper in under a display name with a new user id.
func (s *Server) createSession(c *gin.Context) {
	var req sessionRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	name := strings.TrimSpace(req.Name)
	if msg := orders.CheckText(name, maxShopperName); msg != "" {
		abort(c, invalid("Name %s.", msg))
		return
	}
	id := "u_" + ulid.Make().String()
	tok, exp, err := MintToken([]byte(s.cfg.JWTSecret), id, name, s.cfg.SessionTTL, s.now())
	if err != nil {
		abort(c, err)
		return
	}
	s.setCookie(c, sessionCookie, tok, exp, http.SameSiteLaxMode)
	c.JSON(http.StatusOK, gin.H{"user_id": id, "name": name, "token": tok, "expires_at": exp.UTC().Format(time.RFC3339)})
}

// whoAmI tells a page whose session its HttpOnly cookie holds; without a
// valid session it answers signed_in false rather than a 401, which a
// browser would log as an error.
func (s *Server) whoAmI(c *gin.Context) {
	u, err := s.parseToken(sessionToken(c))
	if err != nil {
		c.JSON(http.StatusOK, gin.H{"signed_in": false})
		return
	}
	c.JSON(http.StatusOK, gin.H{"signed_in": true, "user_id": u.ID, "name": u.Name})
}

// endSession signs a shopper out: the cookie is cleared and, when the
// request carries a valid session, every token of that user issued until
// now stops working (in every server process).
func (s *Server) endSession(c *gin.Context) {
	s.setCookie(c, sessionCookie, "", time.Time{}, http.SameSiteLaxMode)
	if u, err := s.parseToken(sessionToken(c)); err == nil {
		if err := s.signOuts.signOut(c.Request.Context(), u.ID, s.now()); err != nil {
			abort(c, unavailable(err))
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

func (s *Server) setCookie(c *gin.Context, name, value string, exp time.Time, site http.SameSite) {
	ck := &http.Cookie{
		Name: name, Value: value, Path: "/", HttpOnly: true, Secure: s.cfg.CookieSecure, SameSite: site,
	}
	if exp.IsZero() {
		ck.MaxAge = -1
	} else {
		ck.Expires = exp
		ck.MaxAge = int(time.Until(exp).Seconds())
	}
	http.SetCookie(c.Writer, ck)
}

// requireAdmin lets a request through with the configured admin bearer
// token or a live admin session cookie.
func (s *Server) requireAdmin(c *gin.Context) {
	if err := s.adminAuth(c); err != nil {
		abort(c, err)
		return
	}
	c.Next()
}

// adminAuth checks the bearer admin token or the admin session cookie.
func (s *Server) adminAuth(c *gin.Context) error {
	if tok, ok := bearer(c); ok {
		if s.cfg.AdminToken != "" && equalSecret(tok, s.cfg.AdminToken) {
			return nil
		}
		return unauthenticated("Admin token not valid.")
	}
	sess, err := c.Cookie(adminCookie)
	if err != nil || len(sess) != 64 {
		return unauthenticated("Log in as the merchant first.")
	}
	n, err := s.rdb.Exists(c.Request.Context(), s.inv.Keys().AdminSession(sess)).Result()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return unauthenticated("Your admin session has ended; log in again.")
	}
	return nil
}

// adminSession tells the admin page whether it is logged in, without a
// 401 (which a browser logs as an error) when it is not.
func (s *Server) adminSession(c *gin.Context) {
	err := s.adminAuth(c)
	var e *Error
	if err != nil && (!errors.As(err, &e) || e.Status != http.StatusUnauthorized) {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"signed_in": err == nil})
}

func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// checkAdminPassword compares with the configured password, which may be
// plain text or a bcrypt hash.
func (s *Server) checkAdminPassword(pw string) bool {
	want := s.cfg.AdminPassword
	if strings.HasPrefix(want, "$2a$") || strings.HasPrefix(want, "$2b$") || strings.HasPrefix(want, "$2y$") {
		return bcrypt.CompareHashAndPassword([]byte(want), []byte(pw)) == nil
	}
	return equalSecret(pw, want)
}

type loginRequest struct {
	Password string `json:"password"`
}

// login opens an admin session. Attempts are limited per client IP, so a
// password cannot be guessed at speed.
func (s *Server) login(c *gin.Context) {
	now := s.now()
	if r := s.logins.reserve(c.ClientIP(), now); r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		e := newError(http.StatusTooManyRequests, "rate_limited", "Too many login attempts; wait a little.")
		e.RetryAfter = r.DelayFrom(now)
		abort(c, e)
		return
	}
	var req loginRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	if !s.checkAdminPassword(req.Password) {
		abort(c, unauthenticated("Wrong password."))
		return
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	sess := hex.EncodeToString(b)
	if err := s.rdb.Set(c.Request.Context(), s.inv.Keys().AdminSession(sess), "1", adminSessionTTL).Err(); err != nil {
		abort(c, unavailable(err))
		return
	}
	s.setCookie(c, adminCookie, sess, s.now().Add(adminSessionTTL), http.SameSiteStrictMode)
	c.JSON(http.StatusOK, gin.H{"ok": true, "expires_at": s.now().Add(adminSessionTTL).UTC().Format(time.RFC3339)})
}

func (s *Server) logout(c *gin.Context) {
	if sess, err := c.Cookie(adminCookie); err == nil && sess != "" {
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		defer cancel()
		if err := s.rdb.Del(ctx, s.inv.Keys().AdminSession(sess)).Err(); err != nil && !errors.Is(err, redis.Nil) {
			abort(c, unavailable(err))
			return
		}
	}
	s.setCookie(c, adminCookie, "", time.Time{}, http.SameSiteStrictMode)
	c.JSON(http.StatusOK, gin.H{"ok": true})
}
