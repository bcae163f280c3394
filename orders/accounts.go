package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
)

// accountRow is a row of the accounts table.
type accountRow struct {
	ID           string     `db:"id"`
	Email        string     `db:"email"`
	PasswordHash string     `db:"password_hash"`
	VerifiedAt   *time.Time `db:"verified_at"`
	CreatedAt    time.Time  `db:"created_at"`
}

func (r accountRow) account() seckill.Account {
	return seckill.Account{ID: r.ID, Email: r.Email, PasswordHash: r.PasswordHash, VerifiedAt: r.VerifiedAt, CreatedAt: r.CreatedAt}
}

const accountColumns = `id, email, password_hash, verified_at, created_at`

const (
	insertAccount      = `INSERT INTO accounts (` + accountColumns + `) VALUES (?, ?, ?, ?, ?)`
	insertAccountToken = `INSERT INTO account_tokens (token_hash, account_id, expires_at) VALUES (?, ?, ?)`
	selectAccount      = `SELECT ` + accountColumns + ` FROM accounts WHERE `
	selectAccountToken = `SELECT account_id, expires_at, used_at FROM account_tokens WHERE token_hash = ?`
	spendAccountToken  = `UPDATE account_tokens SET used_at = ? WHERE token_hash = ?`
	verifyAccount      = `UPDATE accounts SET verified_at = ? WHERE id = ?`
	insertPasskey      = `INSERT INTO passkeys (id, account_id, credential, created_at) VALUES (?, ?, ?, ?)`
	selectPasskeys     = `SELECT credential FROM passkeys WHERE account_id = ? ORDER BY created_at, id`
	updatePasskey      = `UPDATE passkeys SET credential = ? WHERE id = ? AND account_id = ?`
)

// ErrPasskeyTaken is a passkey registered already.
var ErrPasskeyTaken = seckill.Errorf(seckill.CodeInvalid, "This passkey is registered already.")

// CreateAccount stores a new account with its first verification token
// (by its hash, good until expires): seckill.ErrEmailTaken if its email
// has one already.
func (s *Store) CreateAccount(ctx context.Context, a seckill.Account, tokenHash string, expires time.Time) error {
	return s.InTx(ctx, func(ctx context.Context) error {
		_, err := s.q(ctx).ExecContext(ctx, insertAccount, a.ID, a.Email, a.PasswordHash, a.VerifiedAt, a.CreatedAt.UTC())
		switch {
		case Duplicate(err):
			return seckill.ErrEmailTaken
		case err != nil:
			return failed("create account", err)
		}
		return s.AddAccountToken(ctx, a.ID, tokenHash, expires)
	})
}

// AddAccountToken stores another verification token of an account.
func (s *Store) AddAccountToken(ctx context.Context, account, tokenHash string, expires time.Time) error {
	_, err := s.q(ctx).ExecContext(ctx, insertAccountToken, tokenHash, account, expires.UTC())
	if err != nil {
		return failed("add account token", err)
	}
	return nil
}

// AccountByEmail returns the account of a normalised email, or
// seckill.ErrNoAccount.
func (s *Store) AccountByEmail(ctx context.Context, email string) (seckill.Account, error) {
	return s.getAccount(ctx, selectAccount+`email = ?`, email)
}

// Account returns the account of a user id, or seckill.ErrNoAccount.
func (s *Store) Account(ctx context.Context, id string) (seckill.Account, error) {
	return s.getAccount(ctx, selectAccount+`id = ?`, id)
}

func (s *Store) getAccount(ctx context.Context, query string, arg any) (seckill.Account, error) {
	return one(ctx, s, accountRow.account, seckill.ErrNoAccount, "read account", query, arg)
}

// UseAccountToken spends a verification token (by its hash) at now and
// marks its account verified, in one transaction; check sees the account
// first and may refuse (nothing changes then). seckill.ErrVerifyLink if the token
// is unknown, expired or spent.
func (s *Store) UseAccountToken(ctx context.Context, tokenHash string, now time.Time, check func(seckill.Account) error) (seckill.Account, error) {
	var a seckill.Account
	err := s.InTx(ctx, func(ctx context.Context) error {
		var t struct {
			Account string     `db:"account_id"`
			Expires time.Time  `db:"expires_at"`
			Used    *time.Time `db:"used_at"`
		}
		err := sqlx.GetContext(ctx, s.q(ctx), &t, selectAccountToken+s.dialect.lockRow, tokenHash)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return seckill.ErrVerifyLink
		case err != nil:
			return failed("read account token", err)
		case t.Used != nil, !now.Before(t.Expires):
			return seckill.ErrVerifyLink
		}
		if a, err = s.Account(ctx, t.Account); err != nil {
			return err
		}
		if err := check(a); err != nil {
			return err
		}
		at := now.UTC().Truncate(time.Millisecond)
		if _, err := s.q(ctx).ExecContext(ctx, spendAccountToken, at, tokenHash); err != nil {
			return failed("spend account token", err)
		}
		if a.VerifiedAt == nil {
			if _, err := s.q(ctx).ExecContext(ctx, verifyAccount, at, a.ID); err != nil {
				return failed("verify account", err)
			}
			a.VerifiedAt = &at
		}
		return nil
	})
	return a, err
}

// AddPasskey stores a passkey of an account: its credential id (base64url)
// and the credential as go-webauthn keeps it.
func (s *Store) AddPasskey(ctx context.Context, account, id string, credential []byte, now time.Time) error {
	_, err := s.q(ctx).ExecContext(ctx, insertPasskey, id, account, string(credential), now.UTC())
	if Duplicate(err) {
		return ErrPasskeyTaken
	}
	if err != nil {
		return failed("add passkey", err)
	}
	return nil
}

// Passkeys returns an account's passkeys' credentials.
func (s *Store) Passkeys(ctx context.Context, account string) ([][]byte, error) {
	var rows []string
	if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, selectPasskeys, account); err != nil {
		return nil, failed("read passkeys", err)
	}
	out := make([][]byte, len(rows))
	for i, r := range rows {
		out[i] = []byte(r)
	}
	return out, nil
}

// UpdatePasskey replaces the credential of a passkey of an account (its
// signature counter moved).
func (s *Store) UpdatePasskey(ctx context.Context, account, id string, credential []byte) error {
	res, err := s.q(ctx).ExecContext(ctx, updatePasskey, string(credential), id, account)
	if err != nil {
		return failed("update passkey", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("orders: passkey %s of %s is gone", id, account)
	}
	return nil
}
