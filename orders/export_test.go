package orders

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// MigrateDown undoes the newest applied migration (for upgrade tests).
func MigrateDown(ctx context.Context, db *sqlx.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	_, err = p.Down(ctx)
	return err
}
