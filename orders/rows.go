package orders

import (
	"database/sql"
	"reflect"
	"slices"
	"strings"
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
	Instant       bool         `db:"instant_checkout"`
	Description   string       `db:"description"`
	ImageETag     string       `db:"image_etag"`
	CreatedAt     time.Time    `db:"created_at"`
	UpdatedAt     time.Time    `db:"updated_at"`
}

// saleRowOf is a sale as its row (times in UTC).
func saleRowOf(s seckill.Sale) saleRow {
	return saleRow{
		ID: s.ID, Name: s.Name, Item: s.Item, PriceCents: s.PriceCents, Total: s.Total, PerUserLimit: s.PerUserLimit,
		StartsAt: s.StartsAt.UTC(), EndsAt: s.EndsAt.UTC(), Status: string(s.Status), Buckets: max(1, s.Buckets),
		RequireTicket: s.RequireTicket, PowDifficulty: s.PowDifficulty, VerifiedOnly: s.VerifiedOnly,
		WaitingRoom: s.WaitingRoom, QueueOpensAt: sql.NullTime{Time: s.QueueOpensAt.UTC(), Valid: !s.QueueOpensAt.IsZero()},
		AdmitPerSec: s.AdmitPerSecond, MerchantID: s.MerchantID, Instant: s.InstantCheckout, Description: s.Description, ImageETag: s.ImageETag,
		CreatedAt: s.CreatedAt.UTC().Truncate(time.Millisecond), UpdatedAt: s.UpdatedAt.UTC().Truncate(time.Millisecond),
	}
}

// The sales table's columns as saleRow names them, and its INSERT and
// UPDATE (which leaves the id, the buckets, the instant checkout, the
// creation time and the image as they are: an image changes by SetSaleImage only), named after
// them.
var (
	saleColumns = strings.Join(columnsOf[saleRow](), ", ")
	insertSale  = namedInsert("sales", columnsOf[saleRow](), "id")
	updateSale  = namedUpdate("sales", columnsOf[saleRow](), "id", "buckets", "instant_checkout", "created_at", "image_etag")
)

// sale is the row as a sale; one made before waiting rooms existed has
// the room's defaults.
func (r saleRow) sale() seckill.Sale {
	s := seckill.Sale{
		ID: r.ID, Name: r.Name, Item: r.Item, PriceCents: r.PriceCents, Total: r.Total, PerUserLimit: r.PerUserLimit,
		StartsAt: r.StartsAt, EndsAt: r.EndsAt, Status: seckill.Status(r.Status), Buckets: r.Buckets,
		RequireTicket: r.RequireTicket, PowDifficulty: r.PowDifficulty, VerifiedOnly: r.VerifiedOnly,
		WaitingRoom: r.WaitingRoom, QueueOpensAt: r.QueueOpensAt.Time, AdmitPerSecond: r.AdmitPerSec,
		MerchantID: r.MerchantID, InstantCheckout: r.Instant, Description: r.Description, ImageETag: r.ImageETag, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
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
	ChargeID       *string    `db:"charge_id"`
	RefundedAt     *time.Time `db:"refunded_at"`
}

func (r orderRow) order() seckill.Order {
	return seckill.Order{
		ID: r.ID, SaleID: r.SaleID, UserID: r.UserID, RequestID: r.RequestID, Qty: r.Qty,
		UnitPriceCents: r.UnitPriceCents, AmountCents: r.AmountCents, Status: seckill.OrderStatus(r.Status),
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, PaidAt: r.PaidAt, CancelledAt: r.CancelledAt,
		PersistedAt: r.PersistedAt, ChargeID: deref(r.ChargeID), RefundedAt: r.RefundedAt,
	}
}

// columnsOf lists the db tags of row type R's fields, in order.
func columnsOf[R any]() []string {
	t := reflect.TypeFor[R]()
	out := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if c := t.Field(i).Tag.Get("db"); c != "" && c != "-" {
			out = append(out, c)
		}
	}
	return out
}

// namedInsert is an INSERT of every column but those left out, with
// sqlx's :named placeholders.
func namedInsert(table string, columns []string, leaveOut ...string) string {
	cols := without(columns, leaveOut)
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (:" + strings.Join(cols, ", :") + ")"
}

// namedUpdate is an UPDATE by key of every column but the key and those
// left out, with sqlx's :named placeholders.
func namedUpdate(table string, columns []string, key string, leaveOut ...string) string {
	var set []string
	for _, c := range without(columns, append(leaveOut, key)) {
		set = append(set, c+" = :"+c)
	}
	return "UPDATE " + table + " SET " + strings.Join(set, ", ") + " WHERE " + key + " = :" + key
}

func without(columns, leaveOut []string) []string {
	var out []string
	for _, c := range columns {
		if !slices.Contains(leaveOut, c) {
			out = append(out, c)
		}
	}
	return out
}
