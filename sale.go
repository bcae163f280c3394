package seckill

import (
	"fmt"
	"strings"
	"time"
)

// Bounds of a sale (API.md; docs/security.md). They keep every product the
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

// After is the status a sale in status s has after action a, as
// status.lua decides it in Redis: ending is final, so an ended sale can be
// neither paused nor resumed (ErrEnded).
func (s Status) After(a Action) (Status, error) {
	switch {
	case a == ActionEnd:
		return StatusEnded, nil
	case s == StatusEnded:
		return s, ErrEnded
	case a == ActionPause:
		return StatusPaused, nil
	}
	return StatusActive, nil
}

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
	// InstantCheckout charges the buyer's wallet in the buy itself (API.md,
	// Instant checkout): an order is born paid or not at all. Fixed at
	// creation.
	InstantCheckout bool
	// Description tells shoppers about the item (optional; lines
	// separated by "\n").
	Description string
	// ImageETag names the sale's product image ("" none): set by an
	// upload (images), never by a request's fields.
	ImageETag string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SaleImage is a sale's product image as stored: a JPEG the server made
// (package images), named by its ETag.
type SaleImage struct {
	SaleID        int64
	ETag          string
	Width, Height int
	Bytes         []byte
	UpdatedAt     time.Time
}

// SalePatch holds the fields of a sale a merchant may change, by their
// API names; nil fields stay.
type SalePatch struct {
	Name          *string    `json:"name"`
	Item          *string    `json:"item"`
	PriceCents    *int64     `json:"price_cents"`
	PerUserLimit  *int64     `json:"per_user_limit"`
	StartsAt      *time.Time `json:"starts_at"`
	EndsAt        *time.Time `json:"ends_at"`
	RequireTicket *bool      `json:"require_ticket"`
	PowDifficulty *int       `json:"pow_difficulty"`
	VerifiedOnly  *bool      `json:"verified_only"`
	// The waiting room's settings.
	WaitingRoom    *bool      `json:"waiting_room"`
	QueueOpensAt   *time.Time `json:"queue_opens_at"`
	AdmitPerSecond *int64     `json:"admit_per_second"`
	// MerchantID hands the sale to another merchant (the operator only).
	MerchantID *int64 `json:"merchant_id"`
	// Description is the item's description ("" none).
	Description *string `json:"description"`
}

// SaleInput is what a merchant sends to create a sale or change one
// (API.md): the changeable fields, and the two fixed at creation.
type SaleInput struct {
	SalePatch
	Total           *int64 `json:"total"`
	Buckets         *int   `json:"buckets"`
	InstantCheckout *bool  `json:"instant_checkout"`
}

// NewSale is the sale in creates, active, with the defaults of what it
// leaves out (one bucket, a room opening DefaultQueueLead before the
// start, admitting DefaultAdmitPerSecond), or an invalid_request error
// listing every field that is missing or breaks a rule. Names lose
// surrounding white space first, so what is validated is what is stored.
func (in SaleInput) NewSale() (Sale, error) {
	var fs []FieldError
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"name", in.Name != nil}, {"item", in.Item != nil}, {"price_cents", in.PriceCents != nil},
		{"total", in.Total != nil}, {"per_user_limit", in.PerUserLimit != nil},
		{"starts_at", in.StartsAt != nil}, {"ends_at", in.EndsAt != nil},
	} {
		if !f.set {
			fs = append(fs, FieldError{Field: f.name, Message: msgRequired})
		}
	}
	if len(fs) > 0 {
		return Sale{}, Invalid(fs...)
	}
	// Zeros given are out of range, not the defaults left out.
	if in.Buckets != nil && *in.Buckets == 0 {
		fs = append(fs, FieldError{Field: "buckets", Message: msgBuckets})
	}
	if in.AdmitPerSecond != nil && *in.AdmitPerSecond == 0 {
		fs = append(fs, FieldError{Field: "admit_per_second", Message: msgAdmitPerSecond})
	}
	if in.QueueOpensAt != nil && in.QueueOpensAt.IsZero() {
		fs = append(fs, FieldError{Field: "queue_opens_at", Message: msgSaleTime})
	}
	if len(fs) > 0 {
		return Sale{}, Invalid(fs...)
	}
	s := Sale{Total: *in.Total, Status: StatusActive}.Apply(in.trimmed())
	if in.Buckets != nil {
		s.Buckets = *in.Buckets
	}
	set(&s.InstantCheckout, in.InstantCheckout)
	s = s.WithDefaults()
	return s, s.Validate()
}

// Input is what creates s (a sale made in code: a demo, a test): every
// field given, but those left to their defaults while zero (the buckets,
// the room's opening and rate). SaleInput.NewSale of it is s, active.
func (s Sale) Input() SaleInput {
	in := SaleInput{Total: &s.Total, SalePatch: SalePatch{
		Name: &s.Name, Item: &s.Item, PriceCents: &s.PriceCents, PerUserLimit: &s.PerUserLimit,
		StartsAt: &s.StartsAt, EndsAt: &s.EndsAt, RequireTicket: &s.RequireTicket, PowDifficulty: &s.PowDifficulty,
		VerifiedOnly: &s.VerifiedOnly, WaitingRoom: &s.WaitingRoom, MerchantID: &s.MerchantID, Description: &s.Description,
	}}
	if s.Buckets != 0 {
		in.Buckets = &s.Buckets
	}
	if s.InstantCheckout {
		in.InstantCheckout = &s.InstantCheckout
	}
	if !s.QueueOpensAt.IsZero() {
		in.QueueOpensAt = &s.QueueOpensAt
	}
	if s.AdmitPerSecond != 0 {
		in.AdmitPerSecond = &s.AdmitPerSecond
	}
	return in
}

// Change is the change in says, or an invalid_request error naming the
// fields that are fixed once a sale exists (its total changes by restock
// only; its buckets and instant checkout never).
func (in SaleInput) Change() (SalePatch, error) {
	var fs []FieldError
	if in.Total != nil {
		fs = append(fs, FieldError{Field: "total", Message: "changes only by restock"})
	}
	if in.Buckets != nil {
		fs = append(fs, FieldError{Field: "buckets", Message: msgFixed})
	}
	if in.InstantCheckout != nil {
		fs = append(fs, FieldError{Field: "instant_checkout", Message: msgFixed})
	}
	if len(fs) > 0 {
		return SalePatch{}, Invalid(fs...)
	}
	return in.trimmed(), nil
}

// trimmed is the patch with its names' surrounding white space dropped.
func (in SaleInput) trimmed() SalePatch {
	p := in.SalePatch
	p.Name, p.Item, p.Description = trimmed(p.Name), trimmed(p.Item), trimmed(p.Description)
	return p
}

func trimmed(s *string) *string {
	if s == nil {
		return nil
	}
	t := strings.TrimSpace(*s)
	return &t
}

// The messages of the sale's rules, each written once.
var (
	msgRequired       = "is required"
	msgPrice          = fmt.Sprintf("must be between 0 and %d", MaxPriceCents)
	msgTotal          = fmt.Sprintf("must be between 1 and %d", MaxTotal)
	msgBuckets        = fmt.Sprintf("must be between 1 and %d", MaxBuckets)
	msgPow            = fmt.Sprintf("must be between 0 and %d", MaxPowDifficulty)
	msgAdmitPerSecond = fmt.Sprintf("must be between 1 and %d", MaxAdmitPerSecond)
	msgSaleTime       = fmt.Sprintf("must lie between the years %d and %d", MinSaleTime.Year(), MaxSaleTime.Year())
	msgRestock        = fmt.Sprintf("must be between 1 and %d", MaxTotal)
	msgRestockTotal   = fmt.Sprintf("would take the total over %d", MaxTotal)
	msgFixed          = "is fixed when the sale is created"
	msgInstantFree    = "must be at least 1 on a sale with instant checkout (there is nothing to charge)"
	msgInstantAmount  = fmt.Sprintf("times the price must not exceed %d cents on a sale with instant checkout", MaxAmountCents)
)

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
	set(&s.Description, p.Description)
	return s
}

// Patched is the sale with p applied at now, validated: a sale with a
// waiting room keeps the room's setup once it started (the admission rate
// may still change).
func (s Sale) Patched(p SalePatch, now time.Time) (Sale, error) {
	if f := s.RoomChange(p); f != "" && !now.Before(s.StartsAt) {
		return s, Invalid(FieldError{Field: f,
			Message: "is fixed once a sale with a waiting room has started (the admission rate may still change)"})
	}
	after := s.Apply(p)
	return after, after.Validate()
}

// Restocked is the sale with qty units added to its total, or what is
// wrong with qty (ValidRestock).
func (s Sale) Restocked(qty int64) (Sale, error) {
	if err := ValidRestock(s.Total, qty); err != nil {
		return s, err
	}
	s.Total += qty
	return s, nil
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
	if msg := CheckDescription(s.Description); msg != "" {
		bad("description", msg)
	}
	if s.PriceCents < 0 || s.PriceCents > MaxPriceCents {
		bad("price_cents", msgPrice)
	}
	if s.Total < 1 || s.Total > MaxTotal {
		bad("total", msgTotal)
	}
	if s.PerUserLimit < 1 || s.PerUserLimit > s.Total {
		bad("per_user_limit", "must be between 1 and the total")
	}
	if s.Buckets < 1 || s.Buckets > MaxBuckets {
		bad("buckets", msgBuckets)
	}
	// An instant checkout's charge is computed in Redis's Lua, exact to
	// 2^53: one buy's amount stays within MaxAmountCents.
	if s.InstantCheckout && s.PerUserLimit > 0 && s.PriceCents > 0 && s.PerUserLimit > MaxAmountCents/s.PriceCents {
		bad("per_user_limit", msgInstantAmount)
	}
	if s.InstantCheckout && s.PriceCents == 0 {
		bad("price_cents", msgInstantFree)
	}
	if s.PowDifficulty < 0 || s.PowDifficulty > MaxPowDifficulty {
		bad("pow_difficulty", msgPow)
	}
	if s.AdmitPerSecond < 1 || s.AdmitPerSecond > MaxAdmitPerSecond {
		bad("admit_per_second", msgAdmitPerSecond)
	}
	for _, f := range []struct {
		name string
		at   time.Time
	}{{"starts_at", s.StartsAt}, {"ends_at", s.EndsAt}, {"queue_opens_at", s.QueueOpensAt}} {
		switch {
		case f.at.IsZero():
			bad(f.name, msgRequired)
		case f.at.Before(MinSaleTime) || f.at.After(MaxSaleTime):
			bad(f.name, msgSaleTime)
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
		return Invalid(FieldError{"qty", msgRestock})
	case total+qty > MaxTotal:
		return Invalid(FieldError{"qty", msgRestockTotal})
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
	// MerchantID is whose sale it is: whom a payment credits (0 the
	// operator's; -1 in keys warmed before Redis kept it).
	MerchantID int64
	// Instant is the sale's instant checkout: a buy charges the wallet.
	Instant bool
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
		MerchantID: s.MerchantID, Instant: s.InstantCheckout,
	}
}

// CappedUser is a user refused for their per-user cap in a sale, and when
// that first happened: the accounts of a bot farm hit their caps within
// moments of the opening.
type CappedUser struct {
	UserID string
	At     time.Time
}
