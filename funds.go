package seckill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Money moves in integer minor units (cents) of one currency per
// deployment. Every movement is a Transfer that debits one account and
// credits another by a positive amount; transfers are never updated or
// deleted (a mistake is corrected by another transfer), so the sum over
// all accounts is always zero.

// FundsAccount names an account of the funds ledger: a shopper's wallet, a
// merchant's account, the platform's, or the payment provider's (the
// outside world: top-ups come from it, payouts go to it).
type FundsAccount string

// The accounts that exist once.
const (
	PlatformAccount FundsAccount = "platform"
	ProviderAccount FundsAccount = "provider"
)

// FundsAccountKind is what an account belongs to.
type FundsAccountKind string

// The kinds of account.
const (
	KindWallet   FundsAccountKind = "wallet"
	KindMerchant FundsAccountKind = "merchant"
	KindPlatform FundsAccountKind = "platform"
	KindProvider FundsAccountKind = "provider"
)

// WalletOf is the wallet of a shopper.
func WalletOf(user string) FundsAccount { return FundsAccount("wallet:" + user) }

// MerchantAccountOf is the account of a merchant (0, the operator's sales,
// is the platform's own).
func MerchantAccountOf(merchant int64) FundsAccount {
	if merchant == 0 {
		return PlatformAccount
	}
	return FundsAccount("merchant:" + strconv.FormatInt(merchant, 10))
}

// Kind is the kind of a, or "" for a name that is no account.
func (a FundsAccount) Kind() FundsAccountKind {
	switch {
	case a == PlatformAccount:
		return KindPlatform
	case a == ProviderAccount:
		return KindProvider
	case strings.HasPrefix(string(a), "wallet:") && len(a) > len("wallet:"):
		return KindWallet
	case strings.HasPrefix(string(a), "merchant:"):
		if n, err := strconv.ParseInt(string(a[len("merchant:"):]), 10, 64); err == nil && n > 0 {
			return KindMerchant
		}
	}
	return ""
}

// Floored reports whether the account may never go below zero: wallets and
// merchants' accounts. The platform's may (it pays goodwill credits before
// it earned fees), and the provider's always is: it is what came in from
// the outside world less what went out.
func (a FundsAccount) Floored() bool {
	k := a.Kind()
	return k == KindWallet || k == KindMerchant
}

// User is the shopper whose wallet a is ("" for another kind).
func (a FundsAccount) User() string {
	if a.Kind() != KindWallet {
		return ""
	}
	return string(a[len("wallet:"):])
}

// TransferKind says why money moved.
type TransferKind string

// The kinds of transfer (API.md, Funds).
const (
	TransferTopup  TransferKind = "topup"  // provider → wallet: a payment at the provider succeeded
	TransferCharge TransferKind = "charge" // wallet → merchant: an order paid
	TransferFee    TransferKind = "fee"    // merchant → platform on a charge; platform → wallet on its refund
	TransferRefund TransferKind = "refund" // merchant → wallet: a paid order refunded
	TransferCredit TransferKind = "credit" // platform → wallet: the operator's goodwill
	TransferPayout TransferKind = "payout" // merchant → provider: to the merchant's bank
	TransferVoid   TransferKind = "void"   // a movement undone: a charge whose order was cancelled, not paid; a payout the provider refused
)

// Transfer is one movement of money: Amount cents from Debit to Credit.
type Transfer struct {
	ID     string
	At     time.Time
	Kind   TransferKind
	Amount int64
	Debit  FundsAccount
	Credit FundsAccount
	// What it is for: an order (charge, fee, refund, void), a top-up, a
	// payout; empty otherwise.
	OrderID, TopupID, PayoutID string
}

// Bounds of money (API.md; docs/guide.md, Money). Redis's scripts compute in Lua
// numbers, exact up to 2^53: every balance and amount stays below.
const (
	// MaxAmountCents bounds one transfer and one wallet's balance:
	// 10^15 cents, ten trillion units.
	MaxAmountCents = 1_000_000_000_000_000
	// MaxFeeBps is the platform's whole share.
	MaxFeeBps = 10_000
)

// Fee is the platform's share of amount at bps basis points, rounded
// down, computed without overflow for any amount.
func Fee(amount, bps int64) int64 {
	return amount/MaxFeeBps*bps + amount%MaxFeeBps*bps/MaxFeeBps
}

// Movement is one decision that moves money: one or more transfers
// decided together on one account, its Side, whose floor (or ceiling) the
// decision checks atomically in Redis; each other account of its
// transfers follows once the ledger has them. Its ID makes a retry a
// no-op: the same ID with the same transfers answers the first decision,
// with others is refused (ErrMovementMismatch).
type Movement struct {
	ID        string
	Side      FundsAccount
	Transfers []Transfer
}

// Delta is what the movement does to account a: credits less debits.
func (m Movement) Delta(a FundsAccount) int64 {
	var d int64
	for _, t := range m.Transfers {
		if t.Credit == a {
			d += t.Amount
		}
		if t.Debit == a {
			d -= t.Amount
		}
	}
	return d
}

// Accounts lists the accounts the movement touches, its side first.
func (m Movement) Accounts() []FundsAccount {
	out := []FundsAccount{m.Side}
	for _, t := range m.Transfers {
		for _, a := range []FundsAccount{t.Debit, t.Credit} {
			seen := false
			for _, b := range out {
				seen = seen || a == b
			}
			if !seen {
				out = append(out, a)
			}
		}
	}
	return out
}

// Sum is the movement's total amount: what a retry must repeat.
func (m Movement) Sum() int64 {
	var s int64
	for _, t := range m.Transfers {
		s += t.Amount
	}
	return s
}

// Validate checks that every transfer moves a positive amount within the
// bounds between two different accounts that exist, and that the side is
// one of them.
func (m Movement) Validate() error {
	if m.ID == "" || len(m.ID) > MaxTransferID || len(m.Transfers) == 0 {
		return fmt.Errorf("%w: movement %q with %d transfers", ErrInvalid, m.ID, len(m.Transfers))
	}
	var sum int64
	for _, t := range m.Transfers {
		switch {
		case t.Amount < 1 || t.Amount > MaxAmountCents:
			return fmt.Errorf("%w: transfer %s moves %d cents", ErrInvalid, t.ID, t.Amount)
		case t.Debit == t.Credit || t.Debit.Kind() == "" || t.Credit.Kind() == "":
			return fmt.Errorf("%w: transfer %s from %q to %q", ErrInvalid, t.ID, t.Debit, t.Credit)
		case t.ID == "" || len(t.ID) > MaxTransferID:
			return fmt.Errorf("%w: transfer id %q", ErrInvalid, t.ID)
		}
		sum += t.Amount
	}
	if sum > MaxAmountCents*2 {
		return fmt.Errorf("%w: movement %s moves %d cents", ErrInvalid, m.ID, sum)
	}
	if m.Delta(m.Side) == 0 && !m.touches(m.Side) {
		return fmt.Errorf("%w: movement %s is decided on %s, which it does not touch", ErrInvalid, m.ID, m.Side)
	}
	return nil
}

func (m Movement) touches(a FundsAccount) bool {
	for _, t := range m.Transfers {
		if t.Debit == a || t.Credit == a {
			return true
		}
	}
	return false
}

// MaxTransferID bounds a transfer's and a movement's id.
const MaxTransferID = 128

// The transfer ids of an order's movements: fixed by the order, so each
// is made once whatever the retries (the ledger's primary key holds it).
func chargeID(order string) string  { return "ch." + order }
func feeID(order string) string     { return "fe." + order }
func refundID(order string) string  { return "rf." + order }
func feeBackID(order string) string { return "fr." + order }
func voidID(of string) string       { return "vo." + of }

// Voided returns the id of the movement that void movement id undoes (ok
// false: id is no void's).
func Voided(id string) (of string, ok bool) { return strings.CutPrefix(id, "vo.") }
func topupID(topup string) string           { return "tu." + topup }
func payoutID(payout string) string         { return "po." + payout }
func creditID(user, req string) string      { return "cr." + user + "." + req }

// ChargeMovement is paying order o of merchant's sale at feeBps: the
// amount from the buyer's wallet to the merchant, and the platform's fee
// from the merchant, decided on the wallet (its floor). A free order
// moves nothing (no movement: ok false).
func ChargeMovement(o Order, merchant, feeBps int64, at time.Time) (m Movement, ok bool) {
	if o.AmountCents <= 0 {
		return Movement{}, false
	}
	wallet, to := WalletOf(o.UserID), MerchantAccountOf(merchant)
	m = Movement{ID: chargeID(o.ID), Side: wallet, Transfers: []Transfer{
		{ID: chargeID(o.ID), At: at, Kind: TransferCharge, Amount: o.AmountCents, Debit: wallet, Credit: to, OrderID: o.ID},
	}}
	if fee := Fee(o.AmountCents, feeBps); fee > 0 && to != PlatformAccount {
		m.Transfers = append(m.Transfers, Transfer{ID: feeID(o.ID), At: at, Kind: TransferFee, Amount: fee,
			Debit: to, Credit: PlatformAccount, OrderID: o.ID})
	}
	return m, true
}

// HoldID is the id of the wallet hold of a buy request of an
// instant-checkout sale (package checkout): one per request, whatever its
// attempts, so a retry finds the hold its first attempt made.
func HoldID(sale int64, user, request string) string {
	sum := sha256.Sum256([]byte(strconv.FormatInt(sale, 10) + "/" + user + "/" + request))
	return "hd." + hex.EncodeToString(sum[:16])
}

// ChargeID is the id of the charge that pays order o (its Movement's
// id too).
func ChargeID(order string) string { return chargeID(order) }

// Reverse is the movement that undoes m exactly (each transfer the other
// way, as kind void), decided on m's side: a charge whose order was
// cancelled, not paid, goes back as it came, fee and all.
func Reverse(m Movement, at time.Time) Movement {
	r := Movement{ID: voidID(m.ID), Side: m.Side}
	for _, t := range m.Transfers {
		r.Transfers = append(r.Transfers, Transfer{ID: voidID(t.ID), At: at, Kind: TransferVoid, Amount: t.Amount,
			Debit: t.Credit, Credit: t.Debit, OrderID: t.OrderID, TopupID: t.TopupID, PayoutID: t.PayoutID})
	}
	return r
}

// RefundOf refunds the order that charge paid: its amount back to the
// buyer's wallet, from the merchant what it kept and from the platform
// the fee it took (as the charge split them, whatever the fee is now),
// decided on the merchant's account (its floor: a merchant cannot refund
// money it paid out already).
func RefundOf(charge Movement, at time.Time) Movement {
	var c, fee Transfer
	for _, t := range charge.Transfers {
		switch t.Kind {
		case TransferCharge:
			c = t
		case TransferFee:
			fee = t
		}
	}
	m := Movement{ID: refundID(c.OrderID), Side: c.Credit}
	if kept := c.Amount - fee.Amount; kept > 0 {
		m.Transfers = append(m.Transfers, Transfer{ID: refundID(c.OrderID), At: at, Kind: TransferRefund, Amount: kept,
			Debit: c.Credit, Credit: c.Debit, OrderID: c.OrderID})
	}
	if fee.Amount > 0 {
		m.Transfers = append(m.Transfers, Transfer{ID: feeBackID(c.OrderID), At: at, Kind: TransferFee, Amount: fee.Amount,
			Debit: fee.Credit, Credit: c.Debit, OrderID: c.OrderID})
	}
	return m
}

// TopupMovement credits a top-up the provider confirmed: provider →
// wallet, decided on the wallet (its ceiling).
func TopupMovement(topup, user string, amount int64, at time.Time) Movement {
	id := topupID(topup)
	return Movement{ID: id, Side: WalletOf(user), Transfers: []Transfer{
		{ID: id, At: at, Kind: TransferTopup, Amount: amount, Debit: ProviderAccount, Credit: WalletOf(user), TopupID: topup},
	}}
}

// CreditMovement is the operator's goodwill: platform → wallet, decided
// on the wallet (its ceiling); req is the operator's request id.
func CreditMovement(user, req string, amount int64, at time.Time) Movement {
	id := creditID(user, req)
	return Movement{ID: id, Side: WalletOf(user), Transfers: []Transfer{
		{ID: id, At: at, Kind: TransferCredit, Amount: amount, Debit: PlatformAccount, Credit: WalletOf(user)},
	}}
}

// PayoutMovement pays a merchant's balance out to its bank: merchant →
// provider, decided on the merchant's account (its floor).
func PayoutMovement(payout string, merchant, amount int64, at time.Time) Movement {
	id, from := payoutID(payout), MerchantAccountOf(merchant)
	return Movement{ID: id, Side: from, Transfers: []Transfer{
		{ID: id, At: at, Kind: TransferPayout, Amount: amount, Debit: from, Credit: ProviderAccount, PayoutID: payout},
	}}
}

// StatementLine is a transfer as one account's statement shows it, with
// the account's balance right after it.
type StatementLine struct {
	Transfer
	// Seq orders the ledger's transfers: a statement is newest first.
	Seq          int64
	BalanceAfter int64
}

// TopupStatus is where a top-up stands.
type TopupStatus string

// The states of a top-up: pending until the provider's signed webhook
// says its payment succeeded (and the wallet is credited) or failed.
const (
	TopupPending   TopupStatus = "pending"
	TopupSucceeded TopupStatus = "succeeded"
	TopupFailed    TopupStatus = "failed"
)

// Topup is a shopper's payment at the provider into its wallet.
type Topup struct {
	ID        string
	UserID    string
	RequestID string
	Amount    int64
	Currency  string
	Status    TopupStatus
	// ProviderRef is the provider's id of the payment (a Checkout
	// Session's), CheckoutURL the page the shopper pays at.
	ProviderRef, CheckoutURL string
	CreatedAt, UpdatedAt     time.Time
}

// NewTopupID returns a new top-up id: "tu_" and a ULID.
func NewTopupID() string { return "tu_" + newULID() }

// PaymentEvent is what a provider's webhook says of a top-up's payment,
// once its signature was checked: which top-up, how much in which
// currency, and whether it succeeded or failed (neither: nothing to do).
type PaymentEvent struct {
	// ID is the provider's event id (deliveries repeat it).
	ID        string
	TopupID   string
	Ref       string
	Amount    int64
	Currency  string
	Succeeded bool
	Failed    bool
}

// newULID is a new ULID: unique across processes, sorting by time.
func newULID() string { return ulid.Make().String() }

// PayoutStatus is where a payout stands.
type PayoutStatus string

// The states of a payout: pending until the provider took it (paid) or
// refused it (failed: the money is back in the merchant's account).
const (
	PayoutPending PayoutStatus = "pending"
	PayoutPaid    PayoutStatus = "paid"
	PayoutFailed  PayoutStatus = "failed"
)

// Payout is a merchant's money sent to its bank through the provider.
type Payout struct {
	ID         string
	MerchantID int64
	RequestID  string
	Amount     int64
	// Account (at the provider) and Currency are where it goes and in
	// what, as they were when it was asked for: a retry sends the same.
	Account, Currency string
	Status            PayoutStatus
	ProviderRef       string
	// ReturnedAt is when a failed payout's money came back (nil: not yet).
	ReturnedAt *time.Time
	CreatedAt  time.Time
}

// PayoutIDOf is the id of merchant's payout of request id request: "po_"
// and a hash of both, the same for every retry, so a retry whose first
// attempt moved the money but lost its ledger row (a failed commit) finds
// that movement made rather than making another.
func PayoutIDOf(merchant int64, request string) string {
	sum := sha256.Sum256([]byte(strconv.FormatInt(merchant, 10) + "/" + request))
	return "po_" + hex.EncodeToString(sum[:16])
}

// PayoutID is the id of the movement (and transfer) of payout p.
func PayoutID(p string) string { return payoutID(p) }
