// Package audit is the admin panel's audit log as an application service:
// every state change made through the admin API and every admin sign-in
// is recorded here, by the service that makes it (package sales, package
// merchants), in the transaction of the change; and the log is read here,
// with the one rule of who sees which rows and which addresses, for every
// view of it (the JSON page and the CSV export alike). Rows are appended,
// never updated or deleted (the application's database user may not).
package audit

import (
	"context"
	"time"

	"github.com/seckill/seckill"
)

// Store keeps the log (orders.Store): appended in the transaction its
// context carries, read newest first.
type Store interface {
	AppendAudit(ctx context.Context, e seckill.AuditEntry) error
	AuditLog(ctx context.Context, f seckill.AuditFilter) ([]seckill.AuditEntry, error)
}

// The rows one read returns: at most, and when none is asked.
const (
	MaxPage     = 500
	DefaultPage = 50
)

// Service records and reads the audit log.
type Service struct {
	store Store
	now   func() time.Time
}

// New returns the log kept in store, on the clock now.
func New(store Store, now func() time.Time) *Service { return &Service{store: store, now: now} }

// Record appends e in the name of ctx's actor (who, in which role, from
// which address), now, in the transaction ctx carries if it has one: a
// change and its row commit together or not at all. e says what happened
// (action, sale, owner, before and after).
func (s *Service) Record(ctx context.Context, e seckill.AuditEntry) error {
	a := seckill.ActorOf(ctx)
	e.At = s.now().UTC().Truncate(time.Millisecond)
	e.Actor, e.Role, e.IP = a.ID, a.Role, a.IP
	return s.store.AppendAudit(ctx, e)
}

// Log reads the log for ctx's actor, newest first (f.Limit 1 to MaxPage,
// default DefaultPage). The operator reads every row; a merchant only its
// own (its sales' changes as they were when it owned them, its account's
// events, its sign-ins and the failed sign-ins that named it), and the
// addresses of its own actions only: another actor's address in a
// merchant's row (the operator's, or a guesser's at its login) is blanked.
func (s *Service) Log(ctx context.Context, f seckill.AuditFilter) ([]seckill.AuditEntry, error) {
	reader := seckill.ActorOf(ctx)
	merchant := reader.Role == seckill.RoleMerchant
	if merchant {
		f.Owner = max(reader.MerchantID, 1) // its own rows, and no others'
	}
	if f.Limit <= 0 {
		f.Limit = DefaultPage
	}
	f.Limit = min(f.Limit, MaxPage)
	rows, err := s.store.AuditLog(ctx, f)
	if err != nil {
		return nil, err
	}
	if merchant {
		for i := range rows {
			if rows[i].Actor != reader.ID || rows[i].Role != seckill.RoleMerchant {
				rows[i].IP = ""
			}
		}
	}
	return rows, nil
}
