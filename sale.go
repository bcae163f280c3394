package seckill

import (
	"time"
)

// Bounds of a sale (API.md; the README). They keep every product the
// system computes inside int64: an order's amount is at most
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
	// MaxAdmitPerSecond bounds a waiting room's admission rate;
	// DefaultAdmitPerSecond is a room's when none is given.
	MaxAdmitPerSecond     = 100_000
	DefaultAdmitPerSecond = 100
)

// DefaultQueueLead is how long before its start a sale's waiting room
// opens when no queue_opens_at is given.
const DefaultQueueLead = 15 * time.Minute

// The window of a sale lies within these years, which both MySQL's
// DATETIME and the scripts' millisecond clocks hold exactly.
var (
	MinSaleTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxSaleTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Status is a sale's state as its merchant sets it.
type Status string

// The merchant's states of a sale.
const (
	StatusActive Status = "active"
	StatusPaused Status = "paused"
	StatusEnded  Status = "ended"
)

// Action is what a merchant does to a sale's status: status.lua applies
// it (ending is final: an ended sale can be neither paused nor resumed).
type Action string

// The merchant's actions.
const (
	ActionPause  Action = "pause"
	ActionResume Action = "resume"
	ActionEnd    Action = "end"
)

// Phase is a sale's state as shoppers see it at a moment.
type Phase string

// The shoppers' states of a sale.
const (
	PhaseScheduled Phase = "scheduled"
	PhaseActive    Phase = "active"
	PhasePaused    Phase = "paused"
	PhaseSoldOut   Phase = "sold_out"
	PhaseEnded     Phase = "ended"
)

// Refusal is what a buy is refused in this phase: nil while the sale is
// active or sold out (whether the units suffice is the stock's to say).
func (p Phase) Refusal() error {
	switch p {
	case PhaseScheduled:
		return ErrNotStarted
	case PhaseEnded:
		return ErrEnded
	case PhasePaused:
		return ErrPaused
	}
	return nil
}

// Sale is a merchant's limited stock on sale for a time window.
type Sale struct {
	ID           int64
	Name         string
	Item         string
	PriceCents   int64
	Total        int64
	PerUserLimit int64
	StartsAt     time.Time
	EndsAt       time.Time
	Status       Status
	// Buckets is how many parts the sale's stock is split into in Redis
	// (1 to MaxBuckets), fixed at creation.
	Buckets int
	// RequireTicket makes every buy carry a buy ticket; PowDifficulty
	// (0 to MaxPowDifficulty, 0: none) is the proof of work a ticket costs.
	RequireTicket bool
	PowDifficulty int
	// VerifiedOnly sells only to verified identities.
	VerifiedOnly bool
	// WaitingRoom admits shoppers through a queue (API.md, Waiting room):
	// those who join from QueueOpensAt to StartsAt get random places, later
	// ones line up behind them, and AdmitPerSecond places are let in each
	// second from the start.
	WaitingRoom    bool
	QueueOpensAt   time.Time
	AdmitPerSecond int64
	// MerchantID is the merchant whose sale it is (0: the operator's).
	MerchantID int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
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
	VerifiedOnly  *bool
	// The waiting room's settings.
	WaitingRoom    *bool
	QueueOpensAt   *time.Time
	AdmitPerSecond *int64
	// MerchantID hands the sale to another merchant (the operator only).
	MerchantID *int64
}

// Apply returns the sale with the patch's fields set. A start moved
// without a new queue_opens_at moves the room's opening with it.
func (s Sale) Apply(p SalePatch) Sale {
	if p.StartsAt != nil && p.QueueOpensAt == nil && !s.QueueOpensAt.IsZero() && !s.StartsAt.IsZero() {
		s.QueueOpensAt = s.QueueOpensAt.Add(p.StartsAt.Sub(s.StartsAt))
	}
	set(&s.Name, p.Name)
	set(&s.Item, p.Item)
	set(&s.PriceCents, p.PriceCents)
	set(&s.PerUserLimit, p.PerUserLimit)
	set(&s.StartsAt, p.StartsAt)
	set(&s.EndsAt, p.EndsAt)
	set(&s.RequireTicket, p.RequireTicket)
	set(&s.PowDifficulty, p.PowDifficulty)
	set(&s.VerifiedOnly, p.VerifiedOnly)
	set(&s.WaitingRoom, p.WaitingRoom)
	set(&s.QueueOpensAt, p.QueueOpensAt)
	set(&s.AdmitPerSecond, p.AdmitPerSecond)
	set(&s.MerchantID, p.MerchantID)
	return s
}

// WithDefaults fills what a new sale may leave out: one bucket, a room
// that opens DefaultQueueLead before the start and admits
// DefaultAdmitPerSecond.
func (s Sale) WithDefaults() Sale {
	if s.Buckets == 0 {
		s.Buckets = 1
	}
	if s.QueueOpensAt.IsZero() && !s.StartsAt.IsZero() {
		s.QueueOpensAt = s.StartsAt.Add(-DefaultQueueLead)
	}
	if s.AdmitPerSecond == 0 {
		s.AdmitPerSecond = DefaultAdmitPerSecond
	}
	return s
}

// RoomChange names the field of p that would change the waiting room's
// setup (whether there is one, when it opens, and, for a sale with one,
// when it starts: its admission counts from then), which a started sale
// keeps; "" when p changes none.
func (s Sale) RoomChange(p SalePatch) string {
	after := s.Apply(p)
	switch {
	case after.WaitingRoom != s.WaitingRoom:
		return "waiting_room"
	case !s.WaitingRoom: // no room to keep
	case !after.StartsAt.Equal(s.StartsAt):
		return "starts_at"
	case !after.QueueOpensAt.Equal(s.QueueOpensAt):
		return "queue_opens_at"
	}
	return ""
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Validate checks the rules of API.md for a sale, on the values as they
// will be stored: an invalid_request *Error listing every field that
// breaks one, or nil.
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
	if s.AdmitPerSecond < 1 || s.AdmitPerSecond > MaxAdmitPerSecond {
		bad("admit_per_second", "must be between 1 and 100000")
	}
	for _, f := range []struct {
		name string
		at   time.Time
	}{{"starts_at", s.StartsAt}, {"ends_at", s.EndsAt}, {"queue_opens_at", s.QueueOpensAt}} {
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
	if !s.QueueOpensAt.IsZero() && s.QueueOpensAt.After(s.StartsAt) {
		bad("queue_opens_at", "must not be after starts_at")
	}
	if len(fs) > 0 {
		return Invalid(fs...)
	}
	return nil
}

// ValidRestock reports what is wrong with restocking qty units onto a sale
// of total units, as field "qty", or nil.
func ValidRestock(total, qty int64) error {
	switch {
	case qty < 1 || qty > MaxTotal:
		return Invalid(FieldError{"qty", "must be between 1 and 100000000"})
	case total+qty > MaxTotal:
		return Invalid(FieldError{"qty", "would take the total over 100000000"})
	}
	return nil
}

// Stock is a sale as the gate in Redis holds it now: its counters, and the
// settings the buy path reads without the ledger.
type Stock struct {
	Total, Available, Sold int64
	Limit                  int64
	PriceCents             int64
	Start, End             time.Time
	Status                 Status
	RequireTicket          bool
	PowDifficulty          int
	VerifiedOnly           bool
	WaitingRoom            bool
	QueueOpensAt           time.Time
	AdmitPerSecond         int64
}

// PhaseAt is the sale's state as shoppers see it at now.
func (st Stock) PhaseAt(now time.Time) Phase {
	switch {
	case st.Status == StatusEnded || !now.Before(st.End):
		return PhaseEnded
	case st.Status == StatusPaused:
		return PhasePaused
	case now.Before(st.Start):
		return PhaseScheduled
	case st.Available <= 0:
		return PhaseSoldOut
	}
	return PhaseActive
}

// StockOf is what a sale's stock looks like when Redis holds none of it
// (its keys expired long after its end, or Redis lost them): its settings,
// and no units to sell.
func StockOf(s Sale) Stock {
	return Stock{
		Total: s.Total, Limit: s.PerUserLimit, PriceCents: s.PriceCents, Start: s.StartsAt, End: s.EndsAt,
		Status: s.Status, RequireTicket: s.RequireTicket, PowDifficulty: s.PowDifficulty, VerifiedOnly: s.VerifiedOnly,
		WaitingRoom: s.WaitingRoom, QueueOpensAt: s.QueueOpensAt, AdmitPerSecond: s.AdmitPerSecond,
	}
}

// CappedUser is a user refused for their per-user cap in a sale, and when
// that first happened: the accounts of a bot farm hit their caps within
// moments of the opening.
type CappedUser struct {
	UserID string
	At     time.Time
}
