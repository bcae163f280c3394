// Package merchants is the merchants of the admin panel and the panel's
// sign-in: accounts the operator creates, disables and enables, each
// signing in with its email, password (argon2id, as the shoppers'
// accounts) and, once enrolled, a TOTP code; the operator with the
// configured password. It owns each change of a merchant as package sales
// owns a sale's: one transaction, plain store methods, the audit row
// (package audit) — and records every sign-in and failed sign-in. What a
// merchant may do with sales is package sales' to decide
// (seckill.Actor.Owns); this package says who the merchant is.
package merchants

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
)

// Store keeps the merchants (orders.Store): its methods run in the
// transaction InTx puts in their context.
type Store interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	InsertMerchant(ctx context.Context, m seckill.Merchant) (int64, error)
	Merchant(ctx context.Context, id int64) (seckill.Merchant, error)
	MerchantForUpdate(ctx context.Context, id int64) (seckill.Merchant, error)
	MerchantByEmail(ctx context.Context, email string) (seckill.Merchant, error)
	Merchants(ctx context.Context) ([]seckill.Merchant, error)
	UpdateMerchant(ctx context.Context, m seckill.Merchant) error
	UseTOTPStep(ctx context.Context, id, step int64) (bool, error)
}

// Auditor records a change or a sign-in in the audit log, in the
// transaction of the change (audit.Service).
type Auditor interface {
	Record(ctx context.Context, e seckill.AuditEntry) error
}

// Sessions are the admin sessions (sessions.Admins): the operator's
// password opens one; a merchant's is opened once this package checked it.
type Sessions interface {
	Login(ctx context.Context, password string) (string, time.Time, error)
	Open(ctx context.Context, who string) (string, time.Time, error)
	Logout(ctx context.Context, sess string) error
}

// Service manages merchants and signs admins in.
type Service struct {
	store     Store
	audit     Auditor
	sessions  Sessions
	argon2    identity.Argon2
	passwords identity.Passwords
	now       func() time.Time
}

// New returns the merchants kept in store, their changes and sign-ins
// recorded by audit, their sessions opened by sessions.
func New(store Store, audit Auditor, sessions Sessions, now func() time.Time) *Service {
	return &Service{store: store, audit: audit, sessions: sessions, argon2: identity.OWASP,
		passwords: identity.NewPasswords(identity.OWASP), now: now}
}

// view is what the audit log keeps of a merchant.
func view(m seckill.Merchant) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": m.ID, "email": m.Email, "name": m.Name, "disabled": m.Disabled})
	return b
}

// Refusals.
var (
	ErrOperatorOnly = seckill.Errorf(seckill.CodeForbidden, "Only the operator manages merchants.")
	// ErrWrongLogin answers an unknown email, a wrong password, a
	// disabled merchant and a missing or wrong code alike.
	ErrWrongLogin = seckill.Errorf(seckill.CodeUnauthenticated, "Wrong email, password or code.")
	// ErrDisabled is a merchant's session after the operator disabled it.
	ErrDisabled = seckill.Errorf(seckill.CodeUnauthenticated, "This merchant account is disabled.")
	errTOTPCode = seckill.Errorf(seckill.CodeInvalid, "That code is not the current one of your authenticator app.")
	errNoTOTP   = seckill.Errorf(seckill.CodeInvalid, "Start the enrolment first (POST /admin/api/me/totp).")
)

func operatorOnly(ctx context.Context) error {
	if seckill.ActorOf(ctx).Role != seckill.RoleOperator {
		return ErrOperatorOnly
	}
	return nil
}

// Create opens a merchant account (the operator only).
func (s *Service) Create(ctx context.Context, email, name, password string) (seckill.Merchant, error) {
	if err := operatorOnly(ctx); err != nil {
		return seckill.Merchant{}, err
	}
	norm, err := identity.NormalizeEmail(email)
	var fields []seckill.FieldError
	if err != nil {
		fields = append(fields, seckill.FieldError{Field: "email", Message: "must be an email address such as name@example.com"})
	}
	name = strings.TrimSpace(name)
	if msg := seckill.CheckText(name, 200); msg != "" {
		fields = append(fields, seckill.FieldError{Field: "name", Message: msg})
	}
	var pwErr *seckill.Error
	if errors.As(identity.CheckNewPassword(password), &pwErr) {
		fields = append(fields, pwErr.Fields...)
	}
	if len(fields) > 0 {
		return seckill.Merchant{}, seckill.Invalid(fields...)
	}
	hash, err := identity.HashPassword(ctx, s.argon2, password)
	if err != nil {
		return seckill.Merchant{}, err
	}
	var m seckill.Merchant
	err = s.store.InTx(ctx, func(ctx context.Context) error {
		id, err := s.store.InsertMerchant(ctx, seckill.Merchant{Email: norm, Name: name, PasswordHash: hash, CreatedAt: s.now()})
		if err != nil {
			return err
		}
		if m, err = s.store.Merchant(ctx, id); err != nil {
			return err
		}
		return s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditMerchantNew, Owner: m.ID, After: view(m)})
	})
	return m, err
}

// List returns every merchant (the operator only).
func (s *Service) List(ctx context.Context) ([]seckill.Merchant, error) {
	if err := operatorOnly(ctx); err != nil {
		return nil, err
	}
	return s.store.Merchants(ctx)
}

// SetDisabled disables or enables a merchant (the operator only); a
// disabled merchant's sessions stop working at once (Active).
func (s *Service) SetDisabled(ctx context.Context, id int64, disabled bool) (seckill.Merchant, error) {
	if err := operatorOnly(ctx); err != nil {
		return seckill.Merchant{}, err
	}
	action := seckill.AuditMerchantOn
	if disabled {
		action = seckill.AuditMerchantOff
	}
	return s.change(ctx, id, func(m seckill.Merchant) (seckill.Merchant, seckill.AuditEntry) {
		before := m
		m.Disabled = disabled
		if disabled {
			m.SessionsAfter = s.now().UnixMilli()
		}
		return m, seckill.AuditEntry{Action: action, Before: view(before), After: view(m)}
	})
}

// change changes one merchant in one transaction: it locks its row, asks
// edit for the merchant as it is to be and the audit row that records it,
// writes both and commits.
func (s *Service) change(ctx context.Context, id int64, edit func(seckill.Merchant) (seckill.Merchant, seckill.AuditEntry)) (seckill.Merchant, error) {
	var m seckill.Merchant
	err := s.store.InTx(ctx, func(ctx context.Context) error {
		before, err := s.store.MerchantForUpdate(ctx, id)
		if err != nil {
			return err
		}
		var e seckill.AuditEntry
		m, e = edit(before)
		if err := s.store.UpdateMerchant(ctx, m); err != nil {
			return err
		}
		e.Owner = id
		return s.audit.Record(ctx, e)
	})
	return m, err
}

// ResetTOTP removes a merchant's second factor (the operator only): a
// merchant who lost its device logs in with its password again, and may
// enrol anew.
func (s *Service) ResetTOTP(ctx context.Context, id int64) (seckill.Merchant, error) {
	if err := operatorOnly(ctx); err != nil {
		return seckill.Merchant{}, err
	}
	return s.change(ctx, id, func(m seckill.Merchant) (seckill.Merchant, seckill.AuditEntry) {
		was := m.TOTPConfirmed
		m.TOTPSecret, m.TOTPConfirmed = "", false
		return m, seckill.AuditEntry{Action: seckill.AuditTOTPReset,
			Before: json.RawMessage(fmt.Sprintf(`{"id":%d,"totp":%t}`, id, was)),
			After:  json.RawMessage(fmt.Sprintf(`{"id":%d,"totp":false}`, id))}
	})
}

// Credentials are what an admin signs in with: the operator its
// password alone (Email nil); a merchant its email, password and, once
// enrolled, the code of its authenticator app.
type Credentials struct {
	Email    *string
	Password string
	TOTP     string
}

// Session is an open admin session: its token, when it ends, and whose it
// is.
type Session struct {
	Token   string
	Expires time.Time
	Actor   seckill.Actor
}

// Operator is the configured admin password's and token's actor.
var Operator = seckill.Actor{ID: seckill.RoleOperator, Role: seckill.RoleOperator}

// Actor is merchant m acting.
func Actor(m seckill.Merchant) seckill.Actor {
	return seckill.Actor{ID: m.Email, Role: seckill.RoleMerchant, MerchantID: m.ID}
}

// SignIn checks an admin's credentials and opens its session. Every
// sign-in is in the audit log, in the name of whom it named (from ctx's
// actor's address): a session is opened only with its row; a refused one
// writes a failed sign-in, a merchant's row its own when the email is
// one's, so a merchant sees who tried its account.
func (s *Service) SignIn(ctx context.Context, c Credentials) (Session, error) {
	ip := seckill.ActorOf(ctx).IP
	var (
		sess  Session
		owner int64
		err   error
	)
	if c.Email == nil {
		sess.Actor = Operator
		sess.Actor.IP = ip
		sess.Token, sess.Expires, err = s.sessions.Login(ctx, c.Password)
	} else {
		email, _ := identity.NormalizeEmail(*c.Email)
		sess.Actor = seckill.Actor{ID: email, Role: seckill.RoleMerchant, IP: ip}
		var m seckill.Merchant
		m, owner, err = s.login(ctx, email, c.Password, c.TOTP)
		if err == nil {
			sess.Actor = Actor(m)
			sess.Actor.IP = ip
			sess.Token, sess.Expires, err = s.sessions.Open(ctx, Who(m.ID, s.now()))
		}
	}
	ctx = seckill.WithActor(ctx, sess.Actor)
	if err != nil {
		if seckill.CodeOf(err) == seckill.CodeUnauthenticated {
			if rerr := s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditLoginFailed, Owner: owner}); rerr != nil {
				slog.Warn("a failed sign-in not in the audit log", "err", rerr)
			}
		}
		return Session{}, err
	}
	if err := s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditLogin, Owner: sess.Actor.MerchantID}); err != nil {
		_ = s.sessions.Logout(ctx, sess.Token) // no session without its row
		return Session{}, err
	}
	return sess, nil
}

// login checks a merchant's normalised email, password and (once
// enrolled) TOTP code, each code once. Every refusal is ErrWrongLogin, and
// an unknown email costs what a wrong password does; owner is the
// merchant the email names, if any, even when refused.
func (s *Service) login(ctx context.Context, email, password, code string) (m seckill.Merchant, owner int64, err error) {
	m, err = s.store.MerchantByEmail(ctx, email)
	if err != nil && !errors.Is(err, seckill.ErrNoMerchant) {
		return seckill.Merchant{}, 0, err
	}
	ok, err := s.passwords.Match(ctx, err == nil, m.PasswordHash, password)
	if err != nil {
		return seckill.Merchant{}, m.ID, err
	}
	if !ok || m.Disabled {
		return seckill.Merchant{}, m.ID, ErrWrongLogin
	}
	if m.TOTPConfirmed {
		step, ok := matchStep(m.TOTPSecret, code, s.now())
		if !ok {
			return seckill.Merchant{}, m.ID, ErrWrongLogin
		}
		if fresh, err := s.store.UseTOTPStep(ctx, m.ID, step); err != nil || !fresh {
			if err == nil {
				err = ErrWrongLogin // a code used before
			}
			return seckill.Merchant{}, m.ID, err
		}
	}
	return m, m.ID, nil
}

// Active returns the merchant of a session opened at opened (unix ms), or
// ErrDisabled once the operator disabled it (a session from before a
// disabling stays refused after an enabling).
func (s *Service) Active(ctx context.Context, id, opened int64) (seckill.Merchant, error) {
	m, err := s.store.Merchant(ctx, id)
	switch {
	case errors.Is(err, seckill.ErrNoMerchant), err == nil && (m.Disabled || opened <= m.SessionsAfter):
		return seckill.Merchant{}, ErrDisabled
	case err != nil:
		return seckill.Merchant{}, err
	}
	return m, nil
}

// errNotMerchant asks for what only merchants have.
var errNotMerchant = seckill.Errorf(seckill.CodeForbidden, "A second factor is for merchant accounts; the operator's password is configured.")

// me is the merchant acting in ctx.
func me(ctx context.Context) (int64, error) {
	if a := seckill.ActorOf(ctx); a.Role == seckill.RoleMerchant && a.MerchantID > 0 {
		return a.MerchantID, nil
	}
	return 0, errNotMerchant
}

// EnrolTOTP starts the acting merchant's second factor: a new secret and
// its otpauth:// URL for an authenticator app. It is asked at login only
// once ConfirmTOTP saw a code of it.
func (s *Service) EnrolTOTP(ctx context.Context) (secret, url string, err error) {
	id, err := me(ctx)
	if err != nil {
		return "", "", err
	}
	m, err := s.store.Merchant(ctx, id)
	if err != nil {
		return "", "", err
	}
	if m.TOTPConfirmed {
		return "", "", seckill.Errorf(seckill.CodeInvalid, "A second factor is enrolled already.")
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "Seckill", AccountName: m.Email})
	if err != nil {
		return "", "", fmt.Errorf("merchants: totp: %w", err)
	}
	m.TOTPSecret, m.TOTPConfirmed = key.Secret(), false
	if err := s.store.UpdateMerchant(ctx, m); err != nil {
		return "", "", err
	}
	return key.Secret(), key.URL(), nil
}

// ConfirmTOTP confirms the acting merchant's enrolment with a code of the
// app; from then on it logs in with a code.
func (s *Service) ConfirmTOTP(ctx context.Context, code string) error {
	id, err := me(ctx)
	if err != nil {
		return err
	}
	m, err := s.store.Merchant(ctx, id)
	if err != nil {
		return err
	}
	if m.TOTPSecret == "" || m.TOTPConfirmed {
		return errNoTOTP
	}
	step, ok := matchStep(m.TOTPSecret, code, s.now())
	if !ok {
		return errTOTPCode
	}
	if fresh, err := s.store.UseTOTPStep(ctx, id, step); err != nil || !fresh {
		if err == nil {
			err = errTOTPCode // a code used before
		}
		return err
	}
	_, err = s.change(ctx, id, func(m seckill.Merchant) (seckill.Merchant, seckill.AuditEntry) {
		m.TOTPConfirmed = true
		return m, seckill.AuditEntry{Action: seckill.AuditTOTPEnrol, After: json.RawMessage(`{"totp":true}`)}
	})
	return err
}

// totpOpts are RFC 6238's defaults, as every authenticator app has them.
var totpOpts = totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// matchStep finds the time step (of 30 s, one either side of now for the
// clocks' drift) whose code is code.
func matchStep(secret, code string, now time.Time) (int64, bool) {
	if len(code) != 6 {
		return 0, false
	}
	for _, d := range []int64{0, -1, 1} {
		at := now.Add(time.Duration(d) * 30 * time.Second)
		want, err := totp.GenerateCodeCustom(secret, at, totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return at.Unix() / 30, true
		}
	}
	return 0, false
}

// Who is what an admin session of merchant id opened at now holds:
// "merchant:<id>:<unix ms>".
func Who(id int64, now time.Time) string {
	return "merchant:" + strconv.FormatInt(id, 10) + ":" + strconv.FormatInt(now.UnixMilli(), 10)
}

// ParseWho reads Who: the merchant, and when its session was opened.
func ParseWho(who string) (id, opened int64, ok bool) {
	rest, ok := strings.CutPrefix(who, "merchant:")
	idText, openedText, ok2 := strings.Cut(rest, ":")
	id, err1 := strconv.ParseInt(idText, 10, 64)
	opened, err2 := strconv.ParseInt(openedText, 10, 64)
	return id, opened, ok && ok2 && err1 == nil && err2 == nil && id > 0
}

// errCode asks a merchant enrolled in a second factor for its code before
// money leaves its account.
var errCode = seckill.Errorf(seckill.CodeForbidden, "Give the current code of your authenticator app to pay out.")

// Confirmed returns merchant id once its second-factor code checks, each
// code once, when it is enrolled: what money leaving its account asks.
func (s *Service) Confirmed(ctx context.Context, id int64, code string) (seckill.Merchant, error) {
	m, err := s.store.Merchant(ctx, id)
	if err != nil || !m.TOTPConfirmed {
		return m, err
	}
	step, ok := matchStep(m.TOTPSecret, code, s.now())
	if !ok {
		return seckill.Merchant{}, errCode
	}
	fresh, err := s.store.UseTOTPStep(ctx, id, step)
	if err != nil {
		return seckill.Merchant{}, err
	}
	if !fresh {
		return seckill.Merchant{}, errCode // a code used before
	}
	return m, nil
}

// SetPayoutAccount sets where merchant id's payouts go at the provider (a
// Stripe connected account, acct_…; the operator only), audited.
func (s *Service) SetPayoutAccount(ctx context.Context, id int64, account string) (seckill.Merchant, error) {
	if err := operatorOnly(ctx); err != nil {
		return seckill.Merchant{}, err
	}
	account = strings.TrimSpace(account)
	if len(account) > 255 || strings.ContainsFunc(account, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		return seckill.Merchant{}, seckill.Invalid(seckill.FieldError{Field: "account", Message: "must be a connected account id such as acct_1Abc"})
	}
	return s.change(ctx, id, func(m seckill.Merchant) (seckill.Merchant, seckill.AuditEntry) {
		before := m.PayoutAccount
		m.PayoutAccount = account
		b, _ := json.Marshal(map[string]any{"id": id, "payout_account": before})
		a, _ := json.Marshal(map[string]any{"id": id, "payout_account": account})
		return m, seckill.AuditEntry{Action: seckill.AuditPayoutAccount, Before: b, After: a}
	})
}
