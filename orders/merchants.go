package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill"
)

// merchantRow is a row of the merchants table.
type merchantRow struct {
	ID            int64     `db:"id"`
	Email         string    `db:"email"`
	Name          string    `db:"name"`
	PasswordHash  string    `db:"password_hash"`
	TOTPSecret    string    `db:"totp_secret"`
	TOTPConfirmed bool      `db:"totp_confirmed"`
	TOTPStep      int64     `db:"totp_step"`
	Disabled      bool      `db:"disabled"`
	SessionsAfter int64     `db:"sessions_after"`
	PayoutAccount string    `db:"payout_account"`
	CreatedAt     time.Time `db:"created_at"`
}

func (r merchantRow) merchant() seckill.Merchant {
	return seckill.Merchant{ID: r.ID, Email: r.Email, Name: r.Name, PasswordHash: r.PasswordHash, TOTPSecret: r.TOTPSecret,
		TOTPConfirmed: r.TOTPConfirmed, TOTPStep: r.TOTPStep, Disabled: r.Disabled, SessionsAfter: r.SessionsAfter,
		PayoutAccount: r.PayoutAccount, CreatedAt: r.CreatedAt}
}

const (
	merchantColumns = `id, email, name, password_hash, totp_secret, totp_confirmed, totp_step, disabled, sessions_after, payout_account, created_at`
	insertMerchant  = `INSERT INTO merchants (email, name, password_hash, created_at) VALUES (?, ?, ?, ?)`
	selectMerchant  = `SELECT ` + merchantColumns + ` FROM merchants WHERE `
	selectMerchants = `SELECT ` + merchantColumns + ` FROM merchants ORDER BY id`
	updateMerchant  = `UPDATE merchants SET disabled = ?, sessions_after = ?, totp_secret = ?, totp_confirmed = ?, payout_account = ? WHERE id = ?`
	useTOTPStep     = `UPDATE merchants SET totp_step = ? WHERE id = ? AND totp_step < ?`
)

// InsertMerchant stores a new merchant and returns its id
// (seckill.ErrEmailTaken for an email taken).
func (s *Store) InsertMerchant(ctx context.Context, m seckill.Merchant) (int64, error) {
	res, err := s.q(ctx).ExecContext(ctx, insertMerchant, m.Email, m.Name, m.PasswordHash, m.CreatedAt.UTC().Truncate(time.Millisecond))
	switch {
	case Duplicate(err):
		return 0, seckill.ErrEmailTaken
	case err != nil:
		return 0, failed("create merchant", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, failed("create merchant", err)
	}
	return id, nil
}

// Merchant returns one merchant, or seckill.ErrNoMerchant.
func (s *Store) Merchant(ctx context.Context, id int64) (seckill.Merchant, error) {
	return one(ctx, s, merchantRow.merchant, seckill.ErrNoMerchant, "read merchant", selectMerchant+`id = ?`, id)
}

// MerchantForUpdate returns one merchant with its row locked until ctx's
// transaction ends, or seckill.ErrNoMerchant.
func (s *Store) MerchantForUpdate(ctx context.Context, id int64) (seckill.Merchant, error) {
	return one(ctx, s, merchantRow.merchant, seckill.ErrNoMerchant, "read merchant", selectMerchant+`id = ?`+s.dialect.lockRow, id)
}

// MerchantByEmail returns the merchant of an email, or seckill.ErrNoMerchant.
func (s *Store) MerchantByEmail(ctx context.Context, email string) (seckill.Merchant, error) {
	return one(ctx, s, merchantRow.merchant, seckill.ErrNoMerchant, "read merchant", selectMerchant+`email = ?`, email)
}

// Merchants lists every merchant.
func (s *Store) Merchants(ctx context.Context) ([]seckill.Merchant, error) {
	return all(ctx, s, merchantRow.merchant, "list merchants", selectMerchants)
}

// UpdateMerchant writes what changes of a merchant: whether it is
// disabled, since when its sessions are refused, and its second factor.
func (s *Store) UpdateMerchant(ctx context.Context, m seckill.Merchant) error {
	if _, err := s.q(ctx).ExecContext(ctx, updateMerchant, m.Disabled, m.SessionsAfter, m.TOTPSecret, m.TOTPConfirmed, m.PayoutAccount, m.ID); err != nil {
		return failed(fmt.Sprintf("update merchant %d", m.ID), err)
	}
	return nil
}

// UseTOTPStep records that a merchant's code of time step step was used;
// false if one of that step or a later one was used before (a code works
// once).
func (s *Store) UseTOTPStep(ctx context.Context, id, step int64) (bool, error) {
	res, err := s.q(ctx).ExecContext(ctx, useTOTPStep, step, id, step)
	if err != nil {
		return false, failed("use a second-factor code", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
