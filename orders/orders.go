// Package orders is the durable ledger of Seckill: sales, orders and stock
// movements in MySQL, the order events that carry accepted buys from Redis to
// MySQL, and the order ids that name them.
package orders

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Domain errors of the ledger.
var (
	ErrNotFound     = errors.New("orders: order not found")
	ErrSaleNotFound = errors.New("orders: sale not found")
	ErrCancelled    = errors.New("orders: order cancelled")
	ErrPaid         = errors.New("orders: order paid")
	ErrExpired      = errors.New("orders: payment window closed")
)

// Order statuses.
const (
	StatusPending   = "pending"
	StatusPaid      = "paid"
	StatusCancelled = "cancelled"
)

// Stock movement reasons.
const (
	ReasonInitial = "initial"
	ReasonRestock = "restock"
	ReasonSale    = "sale"
	ReasonCancel  = "cancel"
)

// Bounds of a sale, from API.md and the README. They keep every product
// the system computes inside int64: an order's amount is at most
// MaxTotal × MaxPriceCents = 10^18 < 2^63 ≈ 9.2 × 10^18, and so is a whole
// sale's value.
const (
	MaxTotal      = 100_000_000
	MaxPriceCents = 10_000_000_000 // 100,000,000.00 a unit
	MaxNameLen    = 200
	MaxBuckets    = 64
	// MaxPowDifficulty bounds a sale's proof of work: 2^32 hashes is hours
	// of a browser's time already.
	MaxPowDifficulty = 32
)

// The window of a sale lies within these years, which both MySQL's
// DATETIME and the scripts' millisecond clocks hold exactly.
var (
	MinSaleTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxSaleTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ErrOverflow means an amount does not fit in int64.
var ErrOverflow = errors.New("orders: amount overflows")

// Amount is qty × unit price in cents, or ErrOverflow.
func Amount(qty, priceCents int64) (int64, error) {
	if qty < 0 || priceCents < 0 {
		return 0, fmt.Errorf("%w: negative qty %d or price %d", ErrOverflow, qty, priceCents)
	}
	hi, lo := bits.Mul64(uint64(qty), uint64(priceCents))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d × %d", ErrOverflow, qty, priceCents)
	}
	return int64(lo), nil
}

// Sale is a merchant's limited stock on sale for a time window.
type Sale struct {
	ID           int64     `db:"id"`
	Name         string    `db:"name"`
	Item         string    `db:"item"`
	PriceCents   int64     `db:"price_cents"`
	Total        int64     `db:"total"`
	PerUserLimit int64     `db:"per_user_limit"`
	StartsAt     time.Time `db:"starts_at"`
	EndsAt       time.Time `db:"ends_at"`
	// Status is the merchant's setting: active, paused or ended.
	Status string `db:"status"`
	// Buckets is how many parts the sale's stock is split into in Redis
	// (1 to MaxBuckets), fixed at creation.
	Buckets int `db:"buckets"`
	// RequireTicket makes every buy carry a buy ticket; PowDifficulty
	// (0 to MaxPowDifficulty, 0: none) is the proof of work a ticket costs.
	RequireTicket bool      `db:"require_ticket"`
	PowDifficulty int       `db:"pow_difficulty"`
	CreatedAt     time.Time `db:"created_at"`
	UpdatedAt     time.Time `db:"updated_at"`
}

// SalePatch holds the fields of a sale a merchant may change; nil fields stay.
type SalePatch struct {
	Name          *string
	Item          *string
	PriceCents    *int64
	PerUserLimit  *int64
	StartsAt      *time.Time
	EndsAt        *time.Time
	RequireTicket *bool
	PowDifficulty *int
}

// Apply returns the sale with the patch's fields set.
func (s Sale) Apply(p SalePatch) Sale {
	set(&s.Name, p.Name)
	set(&s.Item, p.Item)
	set(&s.PriceCents, p.PriceCents)
	set(&s.PerUserLimit, p.PerUserLimit)
	set(&s.StartsAt, p.StartsAt)
	set(&s.EndsAt, p.EndsAt)
	set(&s.RequireTicket, p.RequireTicket)
	set(&s.PowDifficulty, p.PowDifficulty)
	return s
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// FieldError is a sale setting that breaks a rule; Field is the JSON name.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every field that breaks a rule.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Field + ": " + f.Message
	}
	return strings.Join(msgs, "; ")
}

// Validate checks the rules of API.md for a sale, on the values as they
// will be stored.
func (s Sale) Validate() error {
	var fs []FieldError
	bad := func(field, msg string) { fs = append(fs, FieldError{field, msg}) }
	if msg := CheckText(s.Name, MaxNameLen); msg != "" {
		bad("name", msg)
	}
	if msg := CheckText(s.Item, MaxNameLen); msg != "" {
		bad("item", msg)
	}
	if s.PriceCents < 0 || s.PriceCents > MaxPriceCents {
		bad("price_cents", "must be between 0 and 10000000000")
	}
	if s.Total < 1 || s.Total > MaxTotal {
		bad("total", "must be between 1 and 100000000")
	}
	if s.PerUserLimit < 1 || s.PerUserLimit > s.Total {
		bad("per_user_limit", "must be between 1 and the total")
	}
	if s.Buckets < 1 || s.Buckets > MaxBuckets {
		bad("buckets", "must be between 1 and 64")
	}
	if s.PowDifficulty < 0 || s.PowDifficulty > MaxPowDifficulty {
		bad("pow_difficulty", "must be between 0 and 32")
	}
	for _, f := range []struct {
		name string
		at   time.Time
	}{{"starts_at", s.StartsAt}, {"ends_at", s.EndsAt}} {
		switch {
		case f.at.IsZero():
			bad(f.name, "is required")
		case f.at.Before(MinSaleTime) || f.at.After(MaxSaleTime):
			bad(f.name, "must lie between the years 2000 and 9999")
		}
	}
	if !s.EndsAt.IsZero() && !s.StartsAt.Before(s.EndsAt) {
		bad("ends_at", "must be after starts_at")
	}
	if len(fs) > 0 {
		return &ValidationError{Fields: fs}
	}
	return nil
}

// CheckText reports what is wrong with a name shown to people (a sale's
// name or item, a shopper's name), or "" if nothing: it must be valid
// UTF-8 of 1 to max characters, must not start or end with white space, and
// must not hold control characters, line or paragraph separators, or the
// invisible characters that reorder text (bidi embeddings, overrides,
// isolates and marks): "invoice \u202Efdp.exe" would show as
// "invoice exe.pdf".
func CheckText(s string, max int) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if n := utf8.RuneCountInString(s); n < 1 || n > max {
		return fmt.Sprintf("must be 1 to %d characters", max)
	}
	if strings.TrimSpace(s) != s {
		return "must not start or end with spaces"
	}
	if strings.IndexFunc(s, forbiddenRune) >= 0 {
		return "must not contain control, line-break or text-direction characters"
	}
	return ""
}

func forbiddenRune(r rune) bool {
	switch {
	case unicode.IsControl(r), r == '\u2028', r == '\u2029': // C0, DEL, C1; line and paragraph separators
		return true
	case r == '\u061C', r == '\u200E', r == '\u200F': // arabic letter, left-to-right and right-to-left marks
		return true
	case r >= '\u202A' && r <= '\u202E', r >= '\u2066' && r <= '\u2069': // embeddings, overrides, isolates
		return true
	}
	return false
}

// Order is one accepted buy, as the ledger holds it.
type Order struct {
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

// Event is an accepted buy on its way from the outbox stream through the
// queue to the ledger. Its JSON is the message body.
type Event struct {
	OrderID    string `json:"order_id"`
	SaleID     int64  `json:"sale_id"`
	UserID     string `json:"user_id"`
	Qty        int64  `json:"qty"`
	PriceCents int64  `json:"price_cents"`
	RequestID  string `json:"request_id"`
	// At is when buy.lua accepted the order, in Unix milliseconds.
	At int64 `json:"ts"`
}

// ValidRequestID reports whether a client-chosen request id is acceptable:
// 8 to 64 characters of [A-Za-z0-9_-]. A loop rather than a regexp: every
// buy checks one, and the regexp was 2% of a sold-out answer's CPU.
func ValidRequestID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidUserID reports whether a user id (a token's subject) is acceptable:
// 1 to 64 printable characters without "|", which separates fields in Redis.
func ValidUserID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == '|' || r == 0x7f {
			return false
		}
	}
	return true
}

// Validate reports an event that cannot become an order (a poison message).
func (e Event) Validate() error {
	switch {
	case SaleOf(e.OrderID) != e.SaleID || e.SaleID <= 0:
		return fmt.Errorf("orders: event: order id %q does not belong to sale %d", e.OrderID, e.SaleID)
	case !ValidUserID(e.UserID):
		return fmt.Errorf("orders: event %s: bad user id", e.OrderID)
	case !ValidRequestID(e.RequestID):
		return fmt.Errorf("orders: event %s: bad request id", e.OrderID)
	case e.Qty < 1 || e.Qty > MaxTotal:
		return fmt.Errorf("orders: event %s: bad qty %d", e.OrderID, e.Qty)
	case e.PriceCents < 0 || e.PriceCents > MaxPriceCents:
		return fmt.Errorf("orders: event %s: bad price %d", e.OrderID, e.PriceCents)
	case e.At <= 0:
		return fmt.Errorf("orders: event %s: bad time %d", e.OrderID, e.At)
	}
	return nil
}

// Order turns a valid event (see Validate) into a pending order whose
// payment window is window.
func (e Event) Order(window time.Duration, now time.Time) Order {
	at := time.UnixMilli(e.At).UTC()
	amount, _ := Amount(e.Qty, e.PriceCents) // bounded by Validate
	return Order{
		ID: e.OrderID, SaleID: e.SaleID, UserID: e.UserID, RequestID: e.RequestID,
		Qty: e.Qty, UnitPriceCents: e.PriceCents, AmountCents: amount,
		Status: StatusPending, CreatedAt: at, ExpiresAt: at.Add(window), PersistedAt: now.UTC(),
	}
}

// NewID returns a new order id for a sale: a ULID (time-sortable, unique
// across processes) followed by "-" and the sale id, so that an order can be
// found in its sale's Redis keys before it reaches MySQL.
func NewID(sale int64) string {
	return ulid.Make().String() + "-" + strconv.FormatInt(sale, 10)
}

// SaleOf returns the sale id an order id belongs to, or 0 if id is not an
// order id.
func SaleOf(id string) int64 {
	u, s, ok := strings.Cut(id, "-")
	if !ok || len(u) != ulid.EncodedSize {
		return 0
	}
	if _, err := ulid.ParseStrict(u); err != nil {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
		return 0
	}
	return n
}
