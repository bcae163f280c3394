package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-webauthn/webauthn/protocol"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/sessions"
)

// Identity are the shoppers' sign-ins a deployment offers; nil services
// are off.
type Identity struct {
	// Guest signs anyone in under a name, a new user each time.
	Guest    Guests
	OIDC     OIDC
	Accounts Accounts
	// Passkeys sign built-in accounts in (nil without accounts).
	Passkeys Passkeys
	// Pending keeps the sign-ins under way (OIDC, passkeys).
	Pending Pending
}

// Guests sign anyone in under a display name (identity.Guests): a new
// user, or why the name is refused.
type Guests interface {
	SignIn(name string) (sessions.User, error)
}

// OIDC signs a browser in at the shop's OpenID Connect provider
// (identity.OIDC): Begin sends it there, Finish exchanges the code it
// comes back with.
type OIDC interface {
	Begin(next string) (string, identity.Login)
	Finish(ctx context.Context, l identity.Login, code string) (sessions.User, error)
}

// Accounts are the built-in shopper accounts (identity.Accounts).
type Accounts interface {
	SignUp(ctx context.Context, email, password string) (seckill.Account, error)
	Resend(ctx context.Context, userID string) (seckill.Account, error)
	Verify(ctx context.Context, token, signedIn string) (seckill.Account, error)
	SignIn(ctx context.Context, email, password string) (sessions.User, error)
	User(ctx context.Context, id string) (sessions.User, error)
}

// Passkeys register and sign in the accounts' passkeys
// (identity.Passkeys): each ceremony begun here is finished by the next
// request with the ceremony its cookie kept.
type Passkeys interface {
	BeginRegistration(ctx context.Context, userID string) (*protocol.CredentialCreation, string, error)
	FinishRegistration(ctx context.Context, userID, ceremony string, body []byte) error
	BeginLogin(ctx context.Context) (*protocol.CredentialAssertion, string, error)
	FinishLogin(ctx context.Context, ceremony string, body []byte) (sessions.User, error)
}

// Pending keeps the provider sign-ins under way between the redirect
// and the callback (identity.Pending).
type Pending interface {
	PutLogin(ctx context.Context, l identity.Login) error
	TakeLogin(ctx context.Context, state string) (identity.Login, error)
}

// Sources names the sign-ins offered, as GET /api/identity lists them.
func (id Identity) Sources() []string {
	var out []string
	if id.OIDC != nil {
		out = append(out, "oidc")
	}
	if id.Accounts != nil {
		out = append(out, "accounts")
	}
	if id.Guest != nil {
		out = append(out, "guest")
	}
	return out
}

const (
	oidcCookie    = "sk_oidc"
	passkeyCookie = "sk_passkey"
	oidcLoginPath = "/auth/oidc/login"
	// passkeyBodyLimit allows a passkey's attestation (certificates
	// included) on its routes.
	passkeyBodyLimit = 16 << 10
)

// Refusals of sign-ins a deployment does not offer.
var (
	errNoGuest    = seckill.Errorf(seckill.CodeForbidden, "This shop does not offer guest sessions: sign in with your account.")
	errNoAccounts = seckill.Errorf(seckill.CodeForbidden, "This shop has no built-in accounts.")
	errNoOIDC     = seckill.Errorf(seckill.CodeNotFound, "This shop signs in without an OpenID Connect provider.")
	errSessionMix = invalid("Sign in with a name (guest) or with email and password, not both.")
	// errResendNotAccount asks for a verification mail without an account.
	errResendNotAccount = seckill.Errorf(seckill.CodeForbidden, "Only a built-in account has an email to confirm: sign in with yours.")
)

// identityRoutes adds the sign-in routes.
func (s *Server) identityRoutes(e *gin.Engine, api *gin.RouterGroup) {
	api.GET("/identity", s.identitySources)
	api.POST("/accounts", s.signUp)
	api.POST("/accounts/verify", s.verifyAccount)
	api.POST("/accounts/resend", s.requireUser, s.resendVerification)
	pk := e.Group("/api/passkeys", s.limitBody(passkeyBodyLimit), s.sameOrigin, s.needPasskeys)
	pk.POST("/register/begin", s.requireUser, s.beginPasskeyRegistration)
	pk.POST("/register/finish", s.requireUser, s.finishPasskeyRegistration)
	pk.POST("/login/begin", s.beginPasskeyLogin)
	pk.POST("/login/finish", s.finishPasskeyLogin)
	e.GET(oidcLoginPath, s.oidcLogin)
	e.GET("/auth/oidc/callback", s.oidcCallback)
}

// identitySources tells the pages which sign-ins to show.
func (s *Server) identitySources(c *gin.Context) {
	var login any
	if s.Identity.OIDC != nil {
		login = oidcLoginPath
	}
	c.JSON(http.StatusOK, gin.H{"sources": s.Identity.Sources(), "oidc_login": login, "passkeys": s.Identity.Passkeys != nil})
}

type sessionRequest struct {
	Name     *string `json:"name"`
	Email    *string `json:"email"`
	Password *string `json:"password"`
}

// createSession signs a shopper in: a guest under a display name (a new
// user id), or a built-in account with its email and password.
func (s *Server) createSession(c *gin.Context) {
	var req sessionRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	switch {
	case req.Name != nil && (req.Email != nil || req.Password != nil):
		abort(c, errSessionMix)
	case req.Name != nil:
		s.guestSession(c, *req.Name)
	case req.Email != nil && req.Password != nil:
		s.passwordSession(c, *req.Email, *req.Password)
	default:
		abort(c, invalid("Send name (a guest session) or email and password."))
	}
}

// whoAmI tells a page whose session its HttpOnly cookie holds; without a
// valid session it answers signed_in false rather than a 401, which a
// browser would log as an error.
func (s *Server) whoAmI(c *gin.Context) {
	u, err := s.Shoppers.Verify(c.Request.Context(), sessionToken(c))
	if err != nil {
		c.JSON(http.StatusOK, gin.H{"signed_in": false})
		return
	}
	c.JSON(http.StatusOK, gin.H{"signed_in": true, "user_id": u.ID, "name": u.Name, "verified": u.Verified})
}

// endSession signs a shopper out: the cookie is cleared and, when the
// request carries a valid session, every token of that user issued until
// now stops working (in every server process).
func (s *Server) endSession(c *gin.Context) {
	s.setCookie(c, sessionCookie, "", time.Time{}, http.SameSiteLaxMode)
	if u, err := s.Shoppers.Verify(c.Request.Context(), sessionToken(c)); err == nil {
		if err := s.Shoppers.SignOut(c.Request.Context(), u.ID); err != nil {
			abort(c, err)
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"ok": true})
}

func (s *Server) guestSession(c *gin.Context, name string) {
	if s.Identity.Guest == nil {
		abort(c, errNoGuest)
		return
	}
	u, err := s.Identity.Guest.SignIn(name)
	if err != nil {
		abort(c, err)
		return
	}
	s.signIn(c, http.StatusOK, u)
}

func (s *Server) passwordSession(c *gin.Context, email, password string) {
	if s.Identity.Accounts == nil {
		abort(c, errNoAccounts)
		return
	}
	// Per address, and per account against guessing from many addresses.
	if !s.throttle(c, s.signins, "sign-in attempts") {
		return
	}
	if norm, err := identity.NormalizeEmail(email); err == nil && !s.throttleKey(c, s.signins, "account:"+norm, "sign-in attempts for this account") {
		return
	}
	u, err := s.Identity.Accounts.SignIn(c.Request.Context(), email, password)
	if err != nil {
		abort(c, err)
		return
	}
	s.signIn(c, http.StatusOK, u)
}

// signIn gives u a session: the token in the answer and in the cookie.
func (s *Server) signIn(c *gin.Context, status int, u sessions.User, extra ...gin.H) {
	tok, exp, ok := s.startSession(c, u)
	if !ok {
		return
	}
	body := gin.H{"user_id": u.ID, "name": u.Name, "verified": u.Verified, "token": tok, "expires_at": exp.UTC().Format(time.RFC3339)}
	for _, e := range extra {
		for k, v := range e {
			body[k] = v
		}
	}
	c.JSON(status, body)
}

// startSession mints u's session token and sets the cookie; false means
// it answered the failure.
func (s *Server) startSession(c *gin.Context, u sessions.User) (string, time.Time, bool) {
	tok, exp, err := s.Shoppers.Mint(u)
	if err != nil {
		abort(c, err)
		return "", time.Time{}, false
	}
	s.setCookie(c, sessionCookie, tok, exp, http.SameSiteLaxMode)
	return tok, exp, true
}

// throttle takes a turn of the limiter l (nil: no limit) for the client's
// address, or answers 429 saying when to retry.
func (s *Server) throttle(c *gin.Context, l *limiter, what string) bool {
	return s.throttleKey(c, l, clientNet(c.ClientIP()), what)
}

// throttleKey takes a turn of l for key.
func (s *Server) throttleKey(c *gin.Context, l *limiter, key, what string) bool {
	if l == nil {
		return true
	}
	now := s.Now()
	r := l.reserve(key, now)
	wait := r.DelayFrom(now)
	if wait == 0 {
		return true
	}
	r.CancelAt(now)
	abort(c, rateLimited(fmt.Sprintf("Too many %s; try again in %d s.", what, int(math.Ceil(wait.Seconds()))), wait))
	return false
}

type accountRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// signUp opens a built-in account, mails its verification link and signs
// it in (not verified yet).
func (s *Server) signUp(c *gin.Context) {
	if s.Identity.Accounts == nil {
		abort(c, errNoAccounts)
		return
	}
	if !s.throttle(c, s.signups, "sign-ups from your address") {
		return
	}
	var req accountRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	acc, err := s.Identity.Accounts.SignUp(c.Request.Context(), req.Email, req.Password)
	if err != nil {
		abort(c, err)
		return
	}
	u, err := s.Identity.Accounts.User(c.Request.Context(), acc.ID)
	if err != nil {
		abort(c, err)
		return
	}
	s.signIn(c, http.StatusCreated, u, gin.H{"email": acc.Email})
}

type verifyRequest struct {
	Token string `json:"token"`
}

// verifyAccount confirms an account's email with the token of its link.
// A browser signed in as that account gets a session that says verified.
func (s *Server) verifyAccount(c *gin.Context) {
	if s.Identity.Accounts == nil {
		abort(c, errNoAccounts)
		return
	}
	var req verifyRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	signedIn, _ := s.Shoppers.Verify(ctx, sessionToken(c))
	acc, err := s.Identity.Accounts.Verify(ctx, req.Token, signedIn.ID)
	if err != nil {
		abort(c, err)
		return
	}
	if signedIn.ID != acc.ID {
		c.JSON(http.StatusOK, gin.H{"verified": true, "email": acc.Email})
		return
	}
	u, err := s.Identity.Accounts.User(ctx, acc.ID)
	if err != nil {
		abort(c, err)
		return
	}
	s.signIn(c, http.StatusOK, u, gin.H{"email": acc.Email})
}

// resendVerification mails a signed-in account a new verification link.
func (s *Server) resendVerification(c *gin.Context) {
	u := currentUser(c)
	if s.Identity.Accounts == nil || !identity.IsAccount(u.ID) {
		abort(c, errResendNotAccount)
		return
	}
	if !s.throttle(c, s.signups, "verification mails") {
		return
	}
	acc, err := s.Identity.Accounts.Resend(c.Request.Context(), u.ID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"email": acc.Email, "verified": acc.Verified(), "sent": !acc.Verified()})
}

// needPasskeys answers 404 on the passkey routes of a deployment without
// them.
func (s *Server) needPasskeys(c *gin.Context) {
	if s.Identity.Passkeys == nil {
		abort(c, seckill.Errorf(seckill.CodeNotFound, "This shop has no passkeys."))
		return
	}
	c.Next()
}

// The passkey ceremonies: begin answers the options for the browser's
// navigator.credentials call and keeps the challenge under a cookie;
// finish takes the credential as PublicKeyCredential.toJSON writes it.

func (s *Server) beginPasskeyRegistration(c *gin.Context) {
	if !s.throttle(c, s.signins, "passkey attempts") {
		return
	}
	opts, ceremony, err := s.Identity.Passkeys.BeginRegistration(c.Request.Context(), currentUser(c).ID)
	s.beginCeremony(c, opts, ceremony, err)
}

func (s *Server) finishPasskeyRegistration(c *gin.Context) {
	body, ceremony, ok := s.ceremonyAnswer(c)
	if !ok {
		return
	}
	if err := s.Identity.Passkeys.FinishRegistration(c.Request.Context(), currentUser(c).ID, ceremony, body); err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"ok": true})
}

func (s *Server) beginPasskeyLogin(c *gin.Context) {
	if !s.throttle(c, s.signins, "sign-in attempts") {
		return
	}
	opts, ceremony, err := s.Identity.Passkeys.BeginLogin(c.Request.Context())
	s.beginCeremony(c, opts, ceremony, err)
}

func (s *Server) finishPasskeyLogin(c *gin.Context) {
	body, ceremony, ok := s.ceremonyAnswer(c)
	if !ok {
		return
	}
	u, err := s.Identity.Passkeys.FinishLogin(c.Request.Context(), ceremony, body)
	if err != nil {
		abort(c, err)
		return
	}
	s.signIn(c, http.StatusOK, u)
}

func (s *Server) beginCeremony(c *gin.Context, opts any, ceremony string, err error) {
	if err != nil {
		abort(c, err)
		return
	}
	s.setCookie(c, passkeyCookie, ceremony, s.Now().Add(5*time.Minute), http.SameSiteStrictMode)
	c.JSON(http.StatusOK, opts)
}

// ceremonyAnswer reads a passkey ceremony's second request: its JSON body
// and the ceremony of its cookie (cleared: each is used once).
func (s *Server) ceremonyAnswer(c *gin.Context) ([]byte, string, bool) {
	body, err := jsonBody(c)
	if err != nil {
		abort(c, err)
		return nil, "", false
	}
	ceremony, _ := c.Cookie(passkeyCookie)
	s.setCookie(c, passkeyCookie, "", time.Time{}, http.SameSiteStrictMode)
	return body, ceremony, true
}

// oidcLogin sends a browser to the provider to sign in, then back to next
// (a path of this site).
func (s *Server) oidcLogin(c *gin.Context) {
	if s.Identity.OIDC == nil {
		abort(c, errNoOIDC)
		return
	}
	if !s.throttle(c, s.signins, "sign-in attempts") {
		return
	}
	next := c.Query("next")
	if !localPath(next) {
		next = "/"
	}
	to, l := s.Identity.OIDC.Begin(next)
	if err := s.Identity.Pending.PutLogin(c.Request.Context(), l); err != nil {
		abort(c, err)
		return
	}
	// Lax: the provider's redirect back is a top-level navigation.
	s.setCookie(c, oidcCookie, l.State, s.Now().Add(identity.LoginTTL), http.SameSiteLaxMode)
	c.Redirect(http.StatusFound, to) // the provider's URL
}

// errLoginState is a callback that this browser did not start (a forged
// or replayed one, or a login CSRF).
var errLoginState = seckill.Errorf(seckill.CodeForbidden, "This sign-in was not started in this browser; start again.")

// oidcCallback finishes a browser's sign-in at the provider: the state
// must be the one this browser was given, the code is exchanged, and the
// shopper gets a session.
func (s *Server) oidcCallback(c *gin.Context) {
	if s.Identity.OIDC == nil {
		abort(c, errNoOIDC)
		return
	}
	u, next, err := s.finishOIDC(c)
	if err != nil {
		// A browser goes back to the shopper page, which says why; anything
		// else gets the error body.
		if strings.Contains(c.GetHeader("Accept"), "text/html") {
			redirect(c, "/?signin_error="+url.QueryEscape(answerFor(c, err).message)+"#/orders")
			return
		}
		abort(c, err)
		return
	}
	if _, _, ok := s.startSession(c, u); ok {
		redirect(c, next)
	}
}

// finishOIDC checks the callback and exchanges its code: the user, and
// where the browser goes next.
func (s *Server) finishOIDC(c *gin.Context) (sessions.User, string, error) {
	state := c.Query("state")
	cookie, _ := c.Cookie(oidcCookie)
	s.setCookie(c, oidcCookie, "", time.Time{}, http.SameSiteLaxMode)
	if state == "" || cookie != state {
		return sessions.User{}, "", errLoginState
	}
	ctx := c.Request.Context()
	l, err := s.Identity.Pending.TakeLogin(ctx, state)
	if err != nil {
		return sessions.User{}, "", err
	}
	if c.Query("error") != "" {
		return sessions.User{}, "", identity.ErrLoginFailed
	}
	u, err := s.Identity.OIDC.Finish(ctx, l, c.Query("code"))
	return u, l.Next, err
}

// redirect answers 302 to a path of this site, as given (http.Redirect
// would clean it, and a cleaned "/./\\host" is another site).
func redirect(c *gin.Context, to string) {
	c.Header("Location", to)
	c.Status(http.StatusFound)
}

// localPath reports whether next is a path on this site: "/…", not
// "//host" (another host), no backslash anywhere (browsers read it as a
// slash), no dot segments, scheme, host or control characters.
func localPath(next string) bool {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") || len(next) > 512 {
		return false
	}
	if strings.IndexFunc(next, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return false
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return false
	}
	clean := path.Clean(u.Path)
	return u.Path == clean || u.Path == clean+"/"
}

// clientNet is what the sign-in limiters count by: the client's IPv4
// address, or its IPv6 /64 (one subscriber's whole prefix).
func clientNet(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Unmap().Is4() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}
