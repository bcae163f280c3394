package orders

import (
	"context"
	"time"

	"github.com/seckill/seckill"
)

// keptRow is a row of kept_sessions.
type keptRow struct {
	Name    string    `db:"name"`
	Value   string    `db:"value"`
	Expires time.Time `db:"expires_at"`
}

// KeepSession keeps a session record until it expires, in place of one of
// the same name.
func (s *Store) KeepSession(ctx context.Context, name, value string, expires time.Time) error {
	return s.InTx(ctx, func(ctx context.Context) error {
		if err := s.ForgetSession(ctx, name); err != nil {
			return err
		}
		_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO kept_sessions (name, value, expires_at) VALUES (?, ?, ?)`,
			name, value, expires.UTC())
		if err != nil {
			return failed("keep session "+name, err)
		}
		return nil
	})
}

// ForgetSession removes a session record (none: nothing happens).
func (s *Store) ForgetSession(ctx context.Context, name string) error {
	if _, err := s.q(ctx).ExecContext(ctx, `DELETE FROM kept_sessions WHERE name = ?`, name); err != nil {
		return failed("forget session "+name, err)
	}
	return nil
}

// KeptSessions removes the records expired at now and returns the rest.
func (s *Store) KeptSessions(ctx context.Context, now time.Time) ([]seckill.KeptSession, error) {
	if _, err := s.q(ctx).ExecContext(ctx, `DELETE FROM kept_sessions WHERE expires_at <= ?`, now.UTC()); err != nil {
		return nil, failed("forget expired sessions", err)
	}
	return all(ctx, s, func(r keptRow) seckill.KeptSession { return seckill.KeptSession(r) }, "kept sessions",
		`SELECT name, value, expires_at FROM kept_sessions ORDER BY name`)
}
