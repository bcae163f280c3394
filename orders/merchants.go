package orders

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

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
	CreatedAt     time.Time `db:"created_at"`
}

func (r merchantRow) merchant() seckill.Merchant {
	return seckill.Merchant{ID: r.ID, Email: r.Email, Name: r.Name, PasswordHash: r.PasswordHash, TOTPSecret: r.TOTPSecret,
		TOTPConfirmed: r.TOTPConfirmed, TOTPStep: r.TOTPStep, Disabled: r.Disabled, SessionsAfter: r.SessionsAfter,
		CreatedAt: r.CreatedAt}
}

const (
	merchantColumns = `id, email, name, password_hash, totp_secret, totp_confirmed, totp_step, disabled, sessions_after, created_at`
	insertMerchant  = `INSERT INTO merchants (email, name, password_hash, created_at) VALUES (?, ?, ?, ?)`
	selectMerchant  = `SELECT ` + merchantColumns + ` FROM merchants WHERE `
	selectMerchants = `SELECT ` + merchantColumns + ` FROM merchants ORDER BY id`
	disableMerchant = `UPDATE merchants SET disabled = ?, sessions_after = ? WHERE id = ?`
	setTOTP         = `UPDATE merchants SET totp_secret = ?, totp_confirmed = ? WHERE id = ?`
	useTOTPStep     = `UPDATE merchants SET totp_step = ? WHERE id = ? AND totp_step < ?`
)

// merchantView is what the audit log keeps of a merchant.
func merchantView(m seckill.Merchant) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": m.ID, "email": m.Email, "name": m.Name, "disabled": m.Disabled})
	return b
}

// CreateMerchant stores a new merchant (seckill.ErrEmailTaken for an
// email taken) and its audit row, in one transaction.
func (s *Store) CreateMerchant(ctx context.Context, m seckill.Merchant, now time.Time) (seckill.Merchant, error) {
	err := s.InTx(ctx, func(ctx context.Context) error {
		res, err := s.q(ctx).ExecContext(ctx, insertMerchant, m.Email, m.Name, m.PasswordHash, now.UTC().Truncate(time.Millisecond))
		switch {
		case Duplicate(err):
			return seckill.ErrEmailTaken
		case err != nil:
			return failed("create merchant", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return failed("create merchant", err)
		}
		if m, err = s.Merchant(ctx, id); err != nil {
			return err
		}
		return s.AppendAudit(ctx, now, seckill.AuditEntry{Action: seckill.AuditMerchantNew, Owner: m.ID, After: merchantView(m)})
	})
	return m, err
}

// Merchant returns one merchant, or seckill.ErrNoMerchant.
func (s *Store) Merchant(ctx context.Context, id int64) (seckill.Merchant, error) {
	return s.getMerchant(ctx, selectMerchant+`id = ?`, id)
}

// MerchantByEmail returns the merchant of an email, or seckill.ErrNoMerchant.
func (s *Store) MerchantByEmail(ctx context.Context, email string) (seckill.Merchant, error) {
	return s.getMerchant(ctx, selectMerchant+`email = ?`, email)
}

func (s *Store) getMerchant(ctx context.Context, q string, arg any) (seckill.Merchant, error) {
	var r merchantRow
	err := sqlx.GetContext(ctx, s.q(ctx), &r, q, arg)
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.Merchant{}, seckill.ErrNoMerchant
	}
	if err != nil {
		return seckill.Merchant{}, failed("read merchant", err)
	}
	return r.merchant(), nil
}

// Merchants lists every merchant.
func (s *Store) Merchants(ctx context.Context) ([]seckill.Merchant, error) {
	var rows []merchantRow
	if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, selectMerchants); err != nil {
		return nil, failed("list merchants", err)
	}
	out := make([]seckill.Merchant, len(rows))
	for i, r := range rows {
		out[i] = r.merchant()
	}
	return out, nil
}

// SetMerchantDisabled disables or enables a merchant, with its audit row,
// in one transaction.
func (s *Store) SetMerchantDisabled(ctx context.Context, id int64, disabled bool, now time.Time) (seckill.Merchant, error) {
	var m seckill.Merchant
	err := s.InTx(ctx, func(ctx context.Context) error {
		before, err := s.getMerchant(ctx, selectMerchant+`id = ?`+s.dialect.lockRow, id)
		if err != nil {
			return err
		}
		m = before
		m.Disabled = disabled
		if disabled {
			m.SessionsAfter = now.UnixMilli()
		}
		if _, err := s.q(ctx).ExecContext(ctx, disableMerchant, disabled, m.SessionsAfter, id); err != nil {
			return failed(fmt.Sprintf("disable merchant %d", id), err)
		}
		action := seckill.AuditMerchantOn
		if disabled {
			action = seckill.AuditMerchantOff
		}
		return s.AppendAudit(ctx, now, seckill.AuditEntry{Action: action, Owner: id, Before: merchantView(before), After: merchantView(m)})
	})
	return m, err
}

// SetTOTP keeps a merchant's second factor: its secret, and whether the
// enrolment is confirmed; confirming writes the audit row, in one
// transaction.
func (s *Store) SetTOTP(ctx context.Context, id int64, secret string, confirmed bool, now time.Time) error {
	return s.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.q(ctx).ExecContext(ctx, setTOTP, secret, confirmed, id); err != nil {
			return failed(fmt.Sprintf("second factor of merchant %d", id), err)
		}
		if !confirmed {
			return nil
		}
		return s.AppendAudit(ctx, now, seckill.AuditEntry{Action: seckill.AuditTOTPEnrol, Owner: id, After: json.RawMessage(`{"totp":true}`)})
	})
}

// ResetTOTP removes a merchant's second factor (the operator's way out
// for a merchant who lost its device), with its audit row, in one
// transaction.
func (s *Store) ResetTOTP(ctx context.Context, id int64, now time.Time) (seckill.Merchant, error) {
	var m seckill.Merchant
	err := s.InTx(ctx, func(ctx context.Context) error {
		before, err := s.getMerchant(ctx, selectMerchant+`id = ?`+s.dialect.lockRow, id)
		if err != nil {
			return err
		}
		if _, err := s.q(ctx).ExecContext(ctx, setTOTP, "", false, id); err != nil {
			return failed(fmt.Sprintf("second factor of merchant %d", id), err)
		}
		m = before
		m.TOTPSecret, m.TOTPConfirmed = "", false
		return s.AppendAudit(ctx, now, seckill.AuditEntry{Action: seckill.AuditTOTPReset, Owner: id,
			Before: json.RawMessage(fmt.Sprintf(`{"id":%d,"totp":%t}`, id, before.TOTPConfirmed)),
			After:  json.RawMessage(fmt.Sprintf(`{"id":%d,"totp":false}`, id))})
	})
	return m, err
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
