package seckill

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// OrderStatus is where an order stands.
type OrderStatus string

// The states of an order: pending until paid, or cancelled when its
// payment window closes unpaid.
const (
	OrderPending   OrderStatus = "pending"
	OrderPaid      OrderStatus = "paid"
	OrderCancelled OrderStatus = "cancelled"
	OrderRefunded  OrderStatus = "refunded"
)

// Returned reports whether the order's units went back to its sale: a
// cancelled order's, or a refunded one's.
func (s OrderStatus) Returned() bool { return s == OrderCancelled || s == OrderRefunded }

// Reason is why a sale's stock moved, in the ledger's stock movements.
type Reason string

// The reasons of stock movements.
const (
	ReasonInitial Reason = "initial"
	ReasonRestock Reason = "restock"
	ReasonSale    Reason = "sale" // the orders themselves: no row of its own (migration 00008)
	ReasonCancel  Reason = "cancel"
)

// ErrOverflow means an amount does not fit in int64.
var ErrOverflow = errors.New("amount overflows")

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

// Order is one accepted buy, as the ledger holds it.
type Order struct {
	ID             string
	SaleID         int64
	UserID         string
	RequestID      string
	Qty            int64
	UnitPriceCents int64
	AmountCents    int64
	Status         OrderStatus
	CreatedAt      time.Time
	ExpiresAt      time.Time
	PaidAt         *time.Time
	CancelledAt    *time.Time
	// ChargeID is the movement that paid the order from its buyer's
	// wallet ("" for an order paid before money moved, or free).
	ChargeID   string
	RefundedAt *time.Time
	// PersistedAt is when the worker wrote the order to the ledger; zero
	// for an order accepted in Redis and not written yet.
	PersistedAt time.Time
	// Pay is how an instant-checkout order is paid, as its event said on
	// its way to the ledger (Event.Pay; the ledger does not keep it).
	Pay string
}

// Event is an accepted buy on its way from Redis through the queue to the
// ledger: what buy.lua records of the order it accepted. Its JSON is the
// queue's message body.
type Event struct {
	OrderID string `json:"order_id"`
	SaleID  int64  `json:"sale_id"`
	UserID  string `json:"user_id"`
	Qty     int64  `json:"qty"`
	// PriceCents is the unit price the order was accepted at; -1 in the
	// Redis record of an order accepted before records kept it (then the
	// sale's price is the order's).
	PriceCents int64  `json:"price_cents"`
	RequestID  string `json:"request_id"`
	// At is when buy.lua accepted the order, in Unix milliseconds.
	At int64 `json:"ts"`
	// Pay says how an instant-checkout order is paid: PayCharged, its
	// charge made in the call that accepted it; PayHeld, its charge held
	// before and posted once the order exists ("": the order waits for a
	// payment in its window).
	Pay string `json:"pay,omitempty"`
}

// How an instant-checkout order's event says it is paid (Event.Pay).
const (
	PayCharged = "charged"
	PayHeld    = "held"
)

// Instant reports whether the event's order was paid in its buy (no
// payment window, no timeout).
func (e Event) Instant() bool { return e.Pay != "" }

// Time is when the order was accepted.
func (e Event) Time() time.Time { return time.UnixMilli(e.At).UTC() }

// Validate reports an event that cannot become an order (a poison message).
func (e Event) Validate() error {
	switch {
	case SaleOfOrder(e.OrderID) != e.SaleID || e.SaleID <= 0:
		return fmt.Errorf("event: order id %q does not belong to sale %d", e.OrderID, e.SaleID)
	case !ValidUserID(e.UserID):
		return fmt.Errorf("event %s: bad user id", e.OrderID)
	case !ValidRequestID(e.RequestID):
		return fmt.Errorf("event %s: bad request id", e.OrderID)
	case e.Qty < 1 || e.Qty > MaxTotal:
		return fmt.Errorf("event %s: bad qty %d", e.OrderID, e.Qty)
	case e.PriceCents < 0 || e.PriceCents > MaxPriceCents:
		return fmt.Errorf("event %s: bad price %d", e.OrderID, e.PriceCents)
	case e.Pay != "" && e.Pay != PayCharged && e.Pay != PayHeld:
		return fmt.Errorf("event %s: bad pay %q", e.OrderID, e.Pay)
	case e.At <= 0:
		return fmt.Errorf("event %s: bad time %d", e.OrderID, e.At)
	}
	return nil
}

// Order turns a valid event (see Validate) into a pending order whose
// payment window is window, persisted at now. An instant-checkout order
// has none and comes paid: charged in its buy's own call (one Redis), or
// its hold posted before it is written (a Cluster).
func (e Event) Order(window time.Duration, now time.Time) Order {
	at := e.Time()
	amount, _ := Amount(e.Qty, e.PriceCents) // bounded by Validate
	if e.Instant() {
		window = 0 // paid in its buy: no window
	}
	o := Order{
		ID: e.OrderID, SaleID: e.SaleID, UserID: e.UserID, RequestID: e.RequestID,
		Qty: e.Qty, UnitPriceCents: e.PriceCents, AmountCents: amount,
		Status: OrderPending, CreatedAt: at, ExpiresAt: at.Add(window), PersistedAt: now.UTC(), Pay: e.Pay,
	}
	if e.Instant() {
		// Charged in the call that accepted it, or its hold posted before
		// it is written (the order consumer): paid as it comes, its charge
		// on its way through the funds pipeline.
		o.Status, o.ChargeID, o.PaidAt = OrderPaid, ChargeID(e.OrderID), &at
	}
	return o
}

// Event is the order as the event that carried it (for rebuilding Redis
// from the ledger).
func (o Order) Event() Event {
	return Event{OrderID: o.ID, SaleID: o.SaleID, UserID: o.UserID, Qty: o.Qty, RequestID: o.RequestID,
		PriceCents: o.UnitPriceCents, At: o.CreatedAt.UnixMilli()}
}

// NewOrderID returns a new order id for a sale: a ULID (time-sortable,
// unique across processes) followed by "-" and the sale id, so that an
// order can be found in its sale's Redis keys before it reaches the ledger.
func NewOrderID(sale int64) string {
	return ulid.Make().String() + "-" + strconv.FormatInt(sale, 10)
}

// SaleOfOrder returns the sale id an order id belongs to, or 0 if id is
// not an order id.
func SaleOfOrder(id string) int64 {
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

// Totals sums what the ledger holds about one sale.
type Totals struct {
	Total     int64
	Orders    map[OrderStatus]int64 // order count by status
	Units     map[OrderStatus]int64 // units by order status
	Movements map[Reason]int64      // delta sum by reason
}

// Sold is the units of the sale's orders that are not cancelled.
func (t Totals) Sold() int64 { return t.Units[OrderPending] + t.Units[OrderPaid] }

// Available is the sum of all stock movements.
func (t Totals) Available() int64 {
	var sum int64
	for _, d := range t.Movements {
		sum += d
	}
	return sum
}

// Persisted is how many of the sale's orders the ledger holds.
func (t Totals) Persisted() int64 {
	return t.Orders[OrderPending] + t.Orders[OrderPaid] + t.Orders[OrderCancelled]
}
