// Package merchants is the merchants of the admin panel: accounts the
// operator creates, disables and enables, each signing in with its email,
// password (argon2id, as the shoppers' accounts) and, once enrolled, a
// TOTP code. What a merchant may do with sales is package sales' to
// decide (seckill.Actor.Owns); this package says who the merchant is.
package merchants

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
)

// Store keeps the merchants (orders.Store).
type Store interface {
	CreateMerchant(ctx context.Context, m seckill.Merchant, now time.Time) (seckill.Merchant, error)
	Merchant(ctx context.Context, id int64) (seckill.Merchant, error)
	MerchantByEmail(ctx context.Context, email string) (seckill.Merchant, error)
	Merchants(ctx context.Context) ([]seckill.Merchant, error)
	SetMerchantDisabled(ctx context.Context, id int64, disabled bool, now time.Time) (seckill.Merchant, error)
	SetTOTP(ctx context.Context, id int64, secret string, confirmed bool, now time.Time) error
	UseTOTPStep(ctx context.Context, id, step int64) (bool, error)
	ResetTOTP(ctx context.Context, id int64, now time.Time) (seckill.Merchant, error)
}

// Service manages merchants and checks their logins.
type Service struct {
	store  Store
	argon2 identity.Argon2
	now    func() time.Time
	decoy  string
}

// New returns the merchants kept in store.
func New(store Store, now func() time.Time) *Service {
	return &Service{store: store, argon2: identity.OWASP, now: now, decoy: identity.OWASP.Hash("no merchant has this")}
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
	return s.store.CreateMerchant(ctx, seckill.Merchant{Email: norm, Name: name, PasswordHash: hash}, s.now())
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
	return s.store.SetMerchantDisabled(ctx, id, disabled, s.now())
}

// ResetTOTP removes a merchant's second factor (the operator only): a
// merchant who lost its device logs in with its password again, and may
// enrol anew.
func (s *Service) ResetTOTP(ctx context.Context, id int64) (seckill.Merchant, error) {
	if err := operatorOnly(ctx); err != nil {
		return seckill.Merchant{}, err
	}
	return s.store.ResetTOTP(ctx, id, s.now())
}

// Login checks a merchant's email, password and (once enrolled) TOTP
// code, each code once. Every refusal is ErrWrongLogin, and an unknown
// email costs what a wrong password does.
func (s *Service) Login(ctx context.Context, email, password, code string) (seckill.Merchant, error) {
	norm, err := identity.NormalizeEmail(email)
	if err != nil {
		return seckill.Merchant{}, ErrWrongLogin
	}
	m, err := s.store.MerchantByEmail(ctx, norm)
	hash := m.PasswordHash
	switch {
	case errors.Is(err, seckill.ErrNoMerchant):
		hash = s.decoy
	case err != nil:
		return seckill.Merchant{}, err
	}
	ok, err := identity.VerifyPassword(ctx, hash, password)
	if err != nil && m.ID != 0 {
		return seckill.Merchant{}, err
	}
	if !ok || m.ID == 0 || m.Disabled {
		return seckill.Merchant{}, ErrWrongLogin
	}
	if m.TOTPConfirmed {
		step, ok := matchStep(m.TOTPSecret, code, s.now())
		if !ok {
			return seckill.Merchant{}, ErrWrongLogin
		}
		if fresh, err := s.store.UseTOTPStep(ctx, m.ID, step); err != nil || !fresh {
			if err != nil {
				return seckill.Merchant{}, err
			}
			return seckill.Merchant{}, ErrWrongLogin // a code used before
		}
	}
	return m, nil
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
	if err := s.store.SetTOTP(ctx, id, key.Secret(), false, s.now()); err != nil {
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
	return s.store.SetTOTP(ctx, id, m.TOTPSecret, true, s.now())
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
