package orders

import (
	"database/sql"
	"time"

	"github.com/seckill/seckill"
)

// saleRow is a row of the sales table.
type saleRow struct {
	ID            int64        `db:"id"`
	Name          string       `db:"name"`
	Item          string       `db:"item"`
	PriceCents    int64        `db:"price_cents"`
	Total         int64        `db:"total"`
	PerUserLimit  int64        `db:"per_user_limit"`
	StartsAt      time.Time    `db:"starts_at"`
	EndsAt        time.Time    `db:"ends_at"`
	Status        string       `db:"status"`
	Buckets       int          `db:"buckets"`
	RequireTicket bool         `db:"require_ticket"`
	PowDifficulty int          `db:"pow_difficulty"`
	VerifiedOnly  bool         `db:"verified_only"`
	WaitingRoom   bool         `db:"waiting_room"`
	QueueOpensAt  sql.NullTime `db:"queue_opens_at"`
	AdmitPerSec   int64        `db:"admit_per_second"`
	MerchantID    int64        `db:"merchant_id"`
	CreatedAt     time.Time    `db:"created_at"`
	UpdatedAt     time.Time    `db:"updated_at"`
}

// sale is the row as a sale; one made before waiting rooms existed has
// the room's defaults.
func (r saleRow) sale() seckill.Sale {
	s := seckill.Sale{
		ID: r.ID, Name: r.Name, Item: r.Item, PriceCents: r.PriceCents, Total: r.Total, PerUserLimit: r.PerUserLimit,
		StartsAt: r.StartsAt, EndsAt: r.EndsAt, Status: seckill.Status(r.Status), Buckets: r.Buckets,
		RequireTicket: r.RequireTicket, PowDifficulty: r.PowDifficulty, VerifiedOnly: r.VerifiedOnly,
		WaitingRoom: r.WaitingRoom, QueueOpensAt: r.QueueOpensAt.Time, AdmitPerSecond: r.AdmitPerSec,
		MerchantID: r.MerchantID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	return s.WithDefaults()
}

// orderRow is a row of the orders table.
type orderRow struct {
	ID             string     `db:"id"`
	SaleID         int64      `db:"sale_id"`
	UserID         string     `db:"user_id"`
	RequestID      string     `db:"request_id"`
	Qty            int64      `db:"qty"`
	UnitPriceCents int64      `db:"unit_price_cents"`
	AmountCents    int64      `db:"amount_cents"`
	Status         string     `db:"status"`
	CreatedAt      time.Time  `db:"created_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	PaidAt         *time.Time `db:"paid_at"`
	CancelledAt    *time.Time `db:"cancelled_at"`
	PersistedAt    time.Time  `db:"persisted_at"`
}

func (r orderRow) order() seckill.Order {
	return seckill.Order{
		ID: r.ID, SaleID: r.SaleID, UserID: r.UserID, RequestID: r.RequestID, Qty: r.Qty,
		UnitPriceCents: r.UnitPriceCents, AmountCents: r.AmountCents, Status: seckill.OrderStatus(r.Status),
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, PaidAt: r.PaidAt, CancelledAt: r.CancelledAt,
		PersistedAt: r.PersistedAt,
	}
}
