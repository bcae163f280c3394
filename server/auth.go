package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/merchants"
	"github.com/seckill/seckill/sessions"
)

// Shoppers issues and checks the shoppers' session tokens
// (sessions.Shoppers); Load and Run follow the sign-outs of every
// process.
type Shoppers interface {
	Mint(u sessions.User) (string, time.Time, error)
	Verify(ctx context.Context, raw string) (sessions.User, error)
	SignOut(ctx context.Context, user string) error
	Load(ctx context.Context) error
	Run(ctx context.Context)
}

// Admins opens and checks the admin sessions (sessions.Admins): the
// operator's password and token, a merchant's session once its login
// passed.
type Admins interface {
	Login(ctx context.Context, password string) (string, time.Time, error)
	Open(ctx context.Context, who string) (string, time.Time, error)
	CheckToken(tok string) error
	Check(ctx context.Context, sess string) (string, error)
	Logout(ctx context.Context, sess string) error
}

const (
	sessionCookie = "sk_session"
	adminCookie   = "sk_admin"
	ctxUser       = "user"

	adminBodyLimit = 16 << 10
	// loginsPerSecond allows 5 admin login attempts a minute per client IP,
	// up to loginBurst at once: a merchant who mistypes can try again at
	// once, a guesser gets 5 a minute. Each account (the operator, a
	// merchant's email) takes accountLogins a minute from all addresses.
	loginsPerSecond = 5.0 / 60
	loginBurst      = 5
	accountLogins   = 20
)

// requireUser authenticates a shopper by "Authorization: Bearer <token>" or
// the session cookie.
func (s *Server) requireUser(c *gin.Context) {
	u, err := s.Shoppers.Verify(c.Request.Context(), sessionToken(c))
	if err != nil {
		abort(c, err)
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

func currentUser(c *gin.Context) sessions.User {
	u, _ := c.Get(ctxUser)
	return u.(sessions.User)
}

func bearer(c *gin.Context) (string, bool) {
	h := c.GetHeader("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
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
// token or a live admin session cookie, acting as its admin: the
// operator, or a merchant (still enabled).
func (s *Server) requireAdmin(c *gin.Context) {
	a, err := s.adminAuth(c)
	if err != nil {
		abort(c, err)
		return
	}
	s.actAs(c, a)
	c.Next()
}

// errOperatorOnly refuses a merchant what only the operator sees.
var errOperatorOnly = seckill.Errorf(seckill.CodeForbidden, "Only the operator sees this.")

// requireOperator lets only the operator through (after requireAdmin).
func (s *Server) requireOperator(c *gin.Context) {
	if seckill.ActorOf(c.Request.Context()).Role != seckill.RoleOperator {
		abort(c, errOperatorOnly)
		return
	}
	c.Next()
}

// actAs makes the request's changes a's, in the audit log and in what
// package sales lets it see.
func (s *Server) actAs(c *gin.Context, a seckill.Actor) {
	a.IP = c.ClientIP()
	c.Request = c.Request.WithContext(seckill.WithActor(c.Request.Context(), a))
}

// adminAuth checks the bearer admin token or the admin session cookie and
// returns whose it is.
func (s *Server) adminAuth(c *gin.Context) (seckill.Actor, error) {
	if tok, ok := bearer(c); ok {
		return merchants.Operator, s.Admins.CheckToken(tok)
	}
	sess, _ := c.Cookie(adminCookie)
	who, err := s.Admins.Check(c.Request.Context(), sess)
	if err != nil {
		return seckill.Actor{}, err
	}
	if who == sessions.Operator {
		return merchants.Operator, nil
	}
	id, opened, ok := merchants.ParseWho(who)
	if !ok {
		return seckill.Actor{}, sessions.ErrAdminEnded
	}
	m, err := s.Merchants.Active(c.Request.Context(), id, opened)
	if err != nil {
		return seckill.Actor{}, err
	}
	return merchants.Actor(m), nil
}

// adminSession tells the admin page whether it is logged in, and as
// whom, without a 401 (which a browser logs as an error) when it is not.
func (s *Server) adminSession(c *gin.Context) {
	a, err := s.adminAuth(c)
	if err != nil && seckill.CodeOf(err) != seckill.CodeUnauthenticated {
		abort(c, err)
		return
	}
	if err != nil {
		c.JSON(http.StatusOK, gin.H{"signed_in": false})
		return
	}
	body := gin.H{"signed_in": true, "role": a.Role, "actor": a.ID}
	if a.MerchantID > 0 {
		body["merchant_id"] = a.MerchantID
	}
	c.JSON(http.StatusOK, body)
}

type loginRequest struct {
	Email    *string `json:"email"`
	Password string  `json:"password"`
	TOTP     string  `json:"totp"`
}

// login opens an admin session. Attempts are limited per client IP, so a
// password cannot be guessed at speed.
func (s *Server) login(c *gin.Context) {
	if !s.throttle(c, s.logins, "login attempts") {
		return
	}
	var req loginRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	// Per account too, against guessing from many addresses, with a
	// budget of its own so that locking an account out costs more.
	account := seckill.RoleOperator
	if req.Email != nil {
		email, _ := identity.NormalizeEmail(*req.Email)
		account = "merchant:" + email
	}
	if !s.throttleKey(c, s.accountLogins, account, "login attempts for this account") {
		return
	}
	s.actAs(c, seckill.Actor{}) // whoever signs in, from this address
	sess, err := s.Merchants.SignIn(c.Request.Context(), merchants.Credentials{Email: req.Email, Password: req.Password, TOTP: req.TOTP})
	if err != nil {
		abort(c, err)
		return
	}
	s.setCookie(c, adminCookie, sess.Token, sess.Expires, http.SameSiteStrictMode)
	c.JSON(http.StatusOK, gin.H{"ok": true, "expires_at": sess.Expires.UTC().Format(time.RFC3339)})
}

func (s *Server) logout(c *gin.Context) {
	if sess, err := c.Cookie(adminCookie); err == nil && sess != "" {
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		defer cancel()
		if err := s.Admins.Logout(ctx, sess); err != nil {
			abort(c, err)
			return
		}
	}
	s.setCookie(c, adminCookie, "", time.Time{}, http.SameSiteStrictMode)
	c.JSON(http.StatusOK, gin.H{"ok": true})
}
