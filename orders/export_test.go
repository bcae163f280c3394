package orders

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// MigrateDownTo undoes the migrations after version (for upgrade tests).
func MigrateDownTo(ctx context.Context, db *sqlx.DB, version int64) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, version)
	return err
}
