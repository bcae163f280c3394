package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sessions"
)

// AccountStore keeps the accounts (orders.Store in MySQL or SQLite).
type AccountStore interface {
	CreateAccount(ctx context.Context, a seckill.Account, tokenHash string, expires time.Time) error
	AddAccountToken(ctx context.Context, account, tokenHash string, expires time.Time) error
	AccountByEmail(ctx context.Context, email string) (seckill.Account, error)
	Account(ctx context.Context, id string) (seckill.Account, error)
	UseAccountToken(ctx context.Context, tokenHash string, now time.Time, check func(seckill.Account) error) (seckill.Account, error)
}

// AccountsConfig is how accounts are kept and confirmed.
type AccountsConfig struct {
	// Argon2 hashes the passwords (default OWASP).
	Argon2 Argon2
	// PublicURL is where shoppers reach this deployment; the verification
	// link points there.
	PublicURL string
	// TokenTTL is how long a verification link works (default 24 h).
	TokenTTL time.Duration
}

// Accounts are the built-in shopper accounts: email and password, the
// email confirmed by a link sent by mail.
type Accounts struct {
	store AccountStore
	mail  Mailer
	cfg   AccountsConfig
	now   func() time.Time
	// passwords check a sign-in; an email without an account costs what
	// a wrong password does.
	passwords Passwords
}

// NewAccounts returns the accounts kept in store, their mail sent by mail.
func NewAccounts(store AccountStore, mail Mailer, cfg AccountsConfig, now func() time.Time) *Accounts {
	if cfg.Argon2 == (Argon2{}) {
		cfg.Argon2 = OWASP
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = 24 * time.Hour
	}
	return &Accounts{
		store: store, mail: mail, cfg: cfg, now: now,
		passwords: NewPasswords(cfg.Argon2),
	}
}

// Bounds of what an account is made of.
const (
	MaxEmail       = 254
	MinPassword    = 10
	MaxPassword    = 256
	accountIDStart = "a_"
)

// IsAccount reports whether a user id is a built-in account's.
func IsAccount(userID string) bool { return strings.HasPrefix(userID, accountIDStart) }

// NormalizeEmail returns the email as accounts keep it: trimmed,
// lowercased, a "+tag" before the "@" dropped; or why it is refused.
func NormalizeEmail(email string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	if len(e) > MaxEmail || seckill.CheckText(e, MaxEmail) != "" {
		return "", invalidField("email", fmt.Sprintf("must be an email address of at most %d characters", MaxEmail))
	}
	local, domain, ok := strings.Cut(e, "@")
	local, _, _ = strings.Cut(local, "+")
	switch {
	case !ok, local == "", strings.ContainsAny(local+domain, "@ \"(),:;<>[\\]"),
		len(domain) < 3, !strings.Contains(domain, "."), strings.HasPrefix(domain, "."), strings.HasSuffix(domain, "."):
		return "", invalidField("email", "must be an email address such as name@example.com")
	}
	return local + "@" + domain, nil
}

// CheckNewPassword refuses a password too short, too long or holding
// control characters.
func CheckNewPassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	switch {
	case !utf8.ValidString(pw):
		return invalidField("password", "must be valid UTF-8")
	case n < MinPassword || n > MaxPassword:
		return invalidField("password", fmt.Sprintf("must be %d to %d characters", MinPassword, MaxPassword))
	case strings.IndexFunc(pw, unicode.IsControl) >= 0:
		return invalidField("password", "must not contain control characters")
	}
	return nil
}

func invalidField(field, msg string) error {
	return seckill.Invalid(seckill.FieldError{Field: field, Message: msg})
}

// SignUp opens an account and mails its verification link:
// seckill.ErrEmailTaken if the email (normalised) has one.
func (a *Accounts) SignUp(ctx context.Context, email, password string) (seckill.Account, error) {
	norm, err := NormalizeEmail(email)
	if err != nil {
		return seckill.Account{}, err
	}
	if err := CheckNewPassword(password); err != nil {
		return seckill.Account{}, err
	}
	hash, err := a.hash(ctx, password)
	if err != nil {
		return seckill.Account{}, err
	}
	acc := seckill.Account{
		ID: accountIDStart + strings.ToLower(ulid.Make().String()), Email: norm, PasswordHash: hash,
		CreatedAt: a.now().UTC().Truncate(time.Millisecond),
	}
	token := randomToken()
	if err := a.store.CreateAccount(ctx, acc, tokenHash(token), acc.CreatedAt.Add(a.cfg.TokenTTL)); err != nil {
		return seckill.Account{}, err
	}
	a.sendLink(ctx, acc, token)
	return acc, nil
}

// Resend mails a new verification link to a signed-in account not yet
// verified.
func (a *Accounts) Resend(ctx context.Context, userID string) (seckill.Account, error) {
	acc, err := a.store.Account(ctx, userID)
	if err != nil || acc.Verified() {
		return acc, err
	}
	token := randomToken()
	if err := a.store.AddAccountToken(ctx, acc.ID, tokenHash(token), a.now().Add(a.cfg.TokenTTL)); err != nil {
		return seckill.Account{}, err
	}
	a.sendLink(ctx, acc, token)
	return acc, nil
}

// sendLink mails an account its verification link. A mail that cannot be
// sent is logged: the shopper asks for another (Resend).
func (a *Accounts) sendLink(ctx context.Context, acc seckill.Account, token string) {
	link := strings.TrimRight(a.cfg.PublicURL, "/") + "/verify?token=" + token
	body := "Confirm the email address of your Seckill account by opening this link (it works for " +
		a.cfg.TokenTTL.String() + "):\r\n\r\n" + link + "\r\n\r\nIf you did not sign up, ignore this mail.\r\n"
	if err := a.mail.Send(ctx, acc.Email, "Confirm your email for Seckill", body); err != nil {
		slog.Warn("identity: verification mail not sent", "account", acc.ID, "err", err)
	}
}

// tokenHash is how a verification token is kept: its SHA-256, in hex.
func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Verify confirms the email of the account a verification token was sent
// to. A shopper signed in as another account (signedIn) is refused, and
// nothing changes.
func (a *Accounts) Verify(ctx context.Context, token, signedIn string) (seckill.Account, error) {
	if token == "" || len(token) > 128 {
		return seckill.Account{}, seckill.ErrVerifyLink
	}
	return a.store.UseAccountToken(ctx, tokenHash(token), a.now(), func(acc seckill.Account) error {
		if IsAccount(signedIn) && signedIn != acc.ID {
			return errOtherAccount
		}
		return nil
	})
}

var (
	errOtherAccount = seckill.Errorf(seckill.CodeForbidden, "This verification link is for another account than the one signed in.")
	// ErrWrongCredentials answers a sign-in whose email has no account or
	// whose password is wrong, alike.
	ErrWrongCredentials = seckill.Errorf(seckill.CodeUnauthenticated, "Wrong email or password.")
)

// SignIn checks an email and password. An unknown email and a wrong
// password are answered alike, and cost the same: a hash is checked
// either way.
func (a *Accounts) SignIn(ctx context.Context, email, password string) (sessions.User, error) {
	norm, err := NormalizeEmail(email)
	if err != nil || len(password) > 4*MaxPassword {
		return sessions.User{}, ErrWrongCredentials
	}
	acc, err := a.store.AccountByEmail(ctx, norm)
	if err != nil && !errors.Is(err, seckill.ErrNoAccount) {
		return sessions.User{}, err
	}
	ok, err := a.passwords.Match(ctx, err == nil, acc.PasswordHash, password)
	if err != nil {
		return sessions.User{}, err
	}
	if !ok {
		return sessions.User{}, ErrWrongCredentials
	}
	return accountUser(acc), nil
}

// accountUser is the shopper an account signs in as.
func accountUser(acc seckill.Account) sessions.User {
	name, _, _ := strings.Cut(acc.Email, "@")
	return sessions.User{ID: acc.ID, Name: displayName(name), Verified: acc.Verified()}
}

// User returns the shopper of an account by user id (a fresh look, after
// its email was confirmed).
func (a *Accounts) User(ctx context.Context, id string) (sessions.User, error) {
	acc, err := a.store.Account(ctx, id)
	if err != nil {
		return sessions.User{}, err
	}
	return accountUser(acc), nil
}

// Verified reports whether user is a built-in account whose email is
// confirmed now. A session says what its account was at sign-in, and the
// email may have been confirmed since (on another device): a buy's gate
// asks here before it refuses it as not verified. Any other user (a
// guest, a provider's) is answered false without a look.
func (a *Accounts) Verified(ctx context.Context, user string) (bool, error) {
	if !IsAccount(user) {
		return false, nil
	}
	acc, err := a.store.Account(ctx, user)
	if err != nil {
		return false, err
	}
	return acc.Verified(), nil
}

func (a *Accounts) hash(ctx context.Context, password string) (string, error) {
	return HashPassword(ctx, a.cfg.Argon2, password)
}
