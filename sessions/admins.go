package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/rdb"
	"golang.org/x/crypto/bcrypt"

	"github.com/seckill/seckill"
)

// AdminTTL is the life of an admin login session.
const AdminTTL = 12 * time.Hour

// Why an admin request is refused.
var (
	ErrWrongPassword = seckill.Errorf(seckill.CodeUnauthenticated, "Wrong password.")
	ErrAdminToken    = seckill.Errorf(seckill.CodeUnauthenticated, "Admin token not valid.")
	ErrNoAdmin       = seckill.Errorf(seckill.CodeUnauthenticated, "Log in as the merchant first.")
	ErrAdminEnded    = seckill.Errorf(seckill.CodeUnauthenticated, "Your admin session has ended; log in again.")
)

// Admins checks the admin panel's password and token, and keeps its login
// sessions in Redis.
type Admins struct {
	rdb      rdb.Client
	keys     rdb.Keys
	keeper   Keeper
	password string
	token    string
	now      func() time.Time
}

// NewAdmins returns the admin sessions on rdb.
func NewAdmins(c rdb.Client, cfg Config, now func() time.Time) *Admins {
	return &Admins{rdb: c, keys: rdb.NewKeys(cfg.Prefix), keeper: cfg.Keeper, password: cfg.AdminPassword, token: cfg.AdminToken, now: now}
}

// Login opens the operator's session for the right password and returns
// its token and expiry, or ErrWrongPassword.
func (a *Admins) Login(ctx context.Context, password string) (string, time.Time, error) {
	if !a.checkPassword(password) {
		return "", time.Time{}, ErrWrongPassword
	}
	return a.Open(ctx, Operator)
}

// Operator is who the operator's sessions are of.
const Operator = seckill.RoleOperator

// Open opens a session of who (Operator, or "merchant:<id>", whose
// credentials the caller checked) and returns its token and expiry.
func (a *Admins) Open(ctx context.Context, who string) (string, time.Time, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	sess := hex.EncodeToString(b)
	if err := a.rdb.Set(ctx, a.keys.AdminSession(sess), who, AdminTTL).Err(); err != nil {
		return "", time.Time{}, failed("open an admin session", err)
	}
	until := a.now().Add(AdminTTL)
	if a.keeper != nil {
		if err := a.keeper.KeepSession(ctx, keptAdmin+sess, who, until); err != nil {
			return "", time.Time{}, err
		}
	}
	return sess, until, nil
}

// checkPassword compares with the configured password, which may be plain
// text or a bcrypt hash.
func (a *Admins) checkPassword(pw string) bool {
	want := a.password
	if strings.HasPrefix(want, "$2a$") || strings.HasPrefix(want, "$2b$") || strings.HasPrefix(want, "$2y$") {
		return bcrypt.CompareHashAndPassword([]byte(want), []byte(pw)) == nil
	}
	return equalSecret(pw, want)
}

// CheckToken accepts the configured admin token (ErrAdminToken otherwise,
// and always when none is configured).
func (a *Admins) CheckToken(tok string) error {
	if a.token != "" && equalSecret(tok, a.token) {
		return nil
	}
	return ErrAdminToken
}

// Check accepts a live admin session and says whose it is (ErrNoAdmin for
// no session, ErrAdminEnded for one that ended).
func (a *Admins) Check(ctx context.Context, sess string) (string, error) {
	if len(sess) != 64 {
		return "", ErrNoAdmin
	}
	who, err := a.rdb.Get(ctx, a.keys.AdminSession(sess)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", ErrAdminEnded
	case err != nil:
		return "", failed("admin session", err)
	case who == "1": // a session from before merchants
		who = Operator
	}
	return who, nil
}

// Logout ends an admin session.
func (a *Admins) Logout(ctx context.Context, sess string) error {
	if err := a.rdb.Del(ctx, a.keys.AdminSession(sess)).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return failed("end an admin session", err)
	}
	if a.keeper != nil {
		return a.keeper.ForgetSession(ctx, keptAdmin+sess)
	}
	return nil
}

func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
