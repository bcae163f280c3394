package seckill

import (
	"context"
	"encoding/json"
	"time"
)

// Actor is who makes a change: an admin (the operator, or a merchant),
// with the client's address, or the system itself.
type Actor struct {
	ID   string
	Role string
	IP   string
	// MerchantID is the merchant acting (RoleMerchant).
	MerchantID int64
}

// The roles of actors: the operator sees and changes every sale and
// manages the merchants; a merchant only its own sales.
const (
	RoleOperator = "operator"
	RoleMerchant = "merchant"
	RoleSystem   = "system"
)

// Owns reports whether the actor may see and change a sale of merchant:
// the operator and the system every sale, a merchant its own.
func (a Actor) Owns(merchant int64) bool {
	switch a.Role {
	case RoleOperator, RoleSystem:
		return true
	case RoleMerchant:
		return a.MerchantID > 0 && a.MerchantID == merchant
	}
	return false
}

type actorKey struct{}

// WithActor returns ctx carrying who acts in it; the changes made under
// it are recorded in their name.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns who acts in ctx: the one WithActor set, or the system
// (a demo, a test, a command on the ledger).
func ActorOf(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return Actor{ID: RoleSystem, Role: RoleSystem}
}

// The actions the audit log records.
const (
	AuditSaleCreate  = "sale.create"
	AuditSalePatch   = "sale.patch"
	AuditSaleRestock = "sale.restock"
	AuditSaleImage   = "sale.image"
	AuditLogin       = "login"
	AuditLoginFailed = "login.failed"
	AuditMerchantNew = "merchant.create"
	AuditMerchantOff = "merchant.disable"
	AuditMerchantOn  = "merchant.enable"
	AuditTOTPEnrol   = "totp.enrol"
	AuditTOTPReset   = "totp.reset"
	// AuditWalletCredit is the operator's goodwill credit to a wallet;
	// AuditOrderRefund a paid order refunded.
	AuditWalletCredit = "wallet.credit"
	AuditOrderRefund  = "order.refund"
	// AuditPayout is a merchant's payout asked for; AuditPayoutAccount
	// where its payouts go, set by the operator.
	AuditPayout        = "payout.create"
	AuditPayoutAccount = "merchant.payout_account"
)

// AuditSaleAction is the action of pausing, resuming or ending a sale.
func AuditSaleAction(a Action) string { return "sale." + string(a) }

// AuditEntry is one row of the audit log: appended in the transaction of
// the change it records, never updated or deleted.
type AuditEntry struct {
	ID     int64
	At     time.Time
	Actor  string
	Role   string
	Action string
	// SaleID is the sale changed (0: none, as for a login).
	SaleID int64
	// Owner is the merchant the row belongs to: the sale's owner when it
	// was written, or the merchant concerned (0: the operator's alone).
	// A merchant reads its own rows only, so a sale handed over does not
	// hand over its history.
	Owner int64
	// Before and After hold the fields that changed, by their API names
	// (JSON objects; nil for none).
	Before, After json.RawMessage
	IP            string
}

// AuditFilter selects audit rows, newest first: of one sale, actor or
// action, at or after Since and before Until (each if set), with ids below
// BeforeID (if set), at most Limit.
type AuditFilter struct {
	SaleID       int64
	Actor        string
	Action       string
	Since, Until time.Time
	BeforeID     int64
	Limit        int
	// Owner, when set, keeps to the rows of that merchant.
	Owner int64
}

// SaleChanges returns the fields of a sale that differ between before and
// after, as each was and is (by their API names); both nil when nothing
// changed. A new sale has every field in after.
func SaleChanges(before, after Sale) (json.RawMessage, json.RawMessage) {
	b, a := saleFields(before), saleFields(after)
	was, is := map[string]any{}, map[string]any{}
	for k, v := range a {
		if before.ID == 0 || b[k] != v {
			is[k] = v
			if before.ID != 0 {
				was[k] = b[k]
			}
		}
	}
	return encodeFields(was), encodeFields(is)
}

func encodeFields(m map[string]any) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	raw, _ := json.Marshal(m) // strings, numbers and booleans only
	return raw
}

// saleFields are a sale's settings by their API names, in comparable
// values.
func saleFields(s Sale) map[string]any {
	return map[string]any{
		"name": s.Name, "item": s.Item, "price_cents": s.PriceCents, "total": s.Total,
		"per_user_limit": s.PerUserLimit, "starts_at": s.StartsAt.UTC().Format(time.RFC3339Nano),
		"ends_at": s.EndsAt.UTC().Format(time.RFC3339Nano), "status": string(s.Status), "buckets": s.Buckets,
		"require_ticket": s.RequireTicket, "pow_difficulty": s.PowDifficulty, "verified_only": s.VerifiedOnly,
		"waiting_room": s.WaitingRoom, "queue_opens_at": s.QueueOpensAt.UTC().Format(time.RFC3339Nano),
		"admit_per_second": s.AdmitPerSecond, "merchant_id": s.MerchantID, "description": s.Description,
		"instant_checkout": s.InstantCheckout,
		"image_etag":       s.ImageETag,
	}
}
