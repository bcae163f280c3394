package orders

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
)

// The funds ledger: transfers, each debiting one account and crediting
// another, appended and never changed. An account's balance is the sum of
// its entries, credits less debits.

// transferRow is a row of the transfers table.
type transferRow struct {
	Seq        int64     `db:"seq"`
	ID         string    `db:"id"`
	MovementID string    `db:"movement_id"`
	Kind       string    `db:"kind"`
	Amount     int64     `db:"amount_cents"`
	Debit      string    `db:"debit"`
	Credit     string    `db:"credit"`
	OrderID    *string   `db:"order_id"`
	TopupID    *string   `db:"topup_id"`
	PayoutID   *string   `db:"payout_id"`
	At         time.Time `db:"at"`
}

func (r transferRow) transfer() seckill.Transfer {
	return seckill.Transfer{ID: r.ID, At: r.At, Kind: seckill.TransferKind(r.Kind), Amount: r.Amount,
		Debit: seckill.FundsAccount(r.Debit), Credit: seckill.FundsAccount(r.Credit),
		OrderID: deref(r.OrderID), TopupID: deref(r.TopupID), PayoutID: deref(r.PayoutID)}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

const (
	transferColumns     = `seq, id, movement_id, kind, amount_cents, debit, credit, order_id, topup_id, payout_id, at`
	insertTransfersHead = `INSERT INTO transfers (id, movement_id, kind, amount_cents, debit, credit, order_id, topup_id, payout_id, at, persisted_at) VALUES `
)

// InsertMovements writes the transfers of movements with multi-row
// INSERTs, and sets paid the pending orders whose charges they hold, in
// one transaction (ctx's, if it has one). Transfers already present are
// left as they are, so a redelivered movement is a no-op.
func (s *Store) InsertMovements(ctx context.Context, ms []seckill.Movement, now time.Time) error {
	type row struct {
		movement string
		t        seckill.Transfer
	}
	var rows []row
	for _, m := range ms {
		for _, t := range m.Transfers {
			rows = append(rows, row{m.ID, t})
		}
	}
	return s.InTx(ctx, func(ctx context.Context) error {
		err := insertRows(ctx, s, "transfers", insertTransfersHead, rows, func(r row) []any {
			t := r.t
			return []any{t.ID, r.movement, t.Kind, t.Amount, t.Debit, t.Credit, orNull(t.OrderID), orNull(t.TopupID),
				orNull(t.PayoutID), t.At.UTC(), now.UTC()}
		}, nil)
		if err != nil {
			return err
		}
		return s.setCharged(ctx, ms)
	})
}

// PaidByCharge sets pending order id paid if the ledger holds its charge
// (a charge written before its order's status came with it).
func (s *Store) PaidByCharge(ctx context.Context, id string) error {
	ts, err := s.OrderTransfers(ctx, id)
	if err != nil {
		return err
	}
	return s.setCharged(ctx, []seckill.Movement{{ID: seckill.ChargeID(id), Transfers: ts}})
}

// setCharged sets paid, in ctx's transaction, the pending orders whose
// charges ms hold: a payment is decided by its charge in Redis, and its
// order's status comes to the ledger with it. An order cancelled or paid
// already is left alone, and one not in the ledger yet is set paid when
// it comes (payCharged).
func (s *Store) setCharged(ctx context.Context, ms []seckill.Movement) error {
	var charges []seckill.Transfer
	for _, m := range ms {
		for _, t := range m.Transfers {
			if t.Kind == seckill.TransferCharge && t.OrderID != "" && m.ID == seckill.ChargeID(t.OrderID) {
				charges = append(charges, t)
			}
		}
	}
	return s.payByCharges(ctx, charges)
}

// payCharged sets paid, in ctx's transaction, the orders of os (just
// inserted) whose charges the ledger holds already: a payment may be made
// before its order reaches the ledger, and its charge may get there
// first. The charges are read share-locked, so a charge whose transaction
// has not committed is waited for; that transaction's own update
// (setCharged) finds these orders once this one commits. Either way one
// of the two sees the other.
func (s *Store) payCharged(ctx context.Context, os []seckill.Order) error {
	var ids []any
	for _, o := range os {
		if o.AmountCents > 0 && o.Status == seckill.OrderPending {
			ids = append(ids, o.ID)
		}
	}
	for len(ids) > 0 {
		n := min(len(ids), maxRowsPerInsert)
		var rows []struct {
			OrderID string    `db:"order_id"`
			At      time.Time `db:"at"`
		}
		q := `SELECT order_id, at FROM transfers WHERE kind = 'charge' AND order_id IN (?` + strings.Repeat(`,?`, n-1) + `)` + s.dialect.lockShared
		if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, q, ids[:n]...); err != nil {
			return failed(fmt.Sprintf("read the charges of %d orders", n), err)
		}
		charges := make([]seckill.Transfer, len(rows))
		for i, r := range rows {
			charges[i] = seckill.Transfer{OrderID: r.OrderID, At: r.At}
		}
		if err := s.payByCharges(ctx, charges); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// payByCharges sets paid the pending orders that charges (of kind charge)
// pay, each at its charge's time.
func (s *Store) payByCharges(ctx context.Context, charges []seckill.Transfer) error {
	for len(charges) > 0 {
		n := min(len(charges), maxRowsPerInsert)
		var ids, charged, at []any
		for _, t := range charges[:n] {
			ids = append(ids, t.OrderID)
			charged = append(charged, t.OrderID, seckill.ChargeID(t.OrderID))
			at = append(at, t.OrderID, t.At.UTC())
		}
		when := strings.Repeat(` WHEN ? THEN ?`, n)
		q := `UPDATE orders SET status = 'paid', charge_id = CASE id` + when + ` END, paid_at = CASE id` + when +
			` END WHERE status = 'pending' AND id IN (?` + strings.Repeat(`,?`, n-1) + `)`
		if _, err := s.q(ctx).ExecContext(ctx, q, append(append(charged, at...), ids...)...); err != nil {
			return failed(fmt.Sprintf("set %d orders paid", n), err)
		}
		charges = charges[n:]
	}
	return nil
}

const (
	selectCredits = `SELECT credit AS account, COALESCE(SUM(amount_cents), 0) AS cents FROM transfers GROUP BY credit`
	selectDebits  = `SELECT debit AS account, COALESCE(SUM(amount_cents), 0) AS cents FROM transfers GROUP BY debit`
)

// FundsBalances sums every account's entries, credits less debits: what
// each account holds by the ledger (O(transfers), for the reconciler).
func (s *Store) FundsBalances(ctx context.Context) (map[seckill.FundsAccount]int64, error) {
	out := map[seckill.FundsAccount]int64{}
	for _, side := range []struct {
		q    string
		sign int64
	}{{selectCredits, 1}, {selectDebits, -1}} {
		var rows []struct {
			Account string `db:"account"`
			Cents   int64  `db:"cents"`
		}
		if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, side.q); err != nil {
			return nil, failed("sum the accounts", err)
		}
		for _, r := range rows {
			out[seckill.FundsAccount(r.Account)] += side.sign * r.Cents
		}
	}
	return out, nil
}

const selectAccountSums = `SELECT
  (SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE credit = ?) -
  (SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE debit = ?)`

// FundsBalance is one account's balance by the ledger.
func (s *Store) FundsBalance(ctx context.Context, a seckill.FundsAccount) (int64, error) {
	var n int64
	if err := sqlx.GetContext(ctx, s.q(ctx), &n, selectAccountSums, a, a); err != nil {
		return 0, failed("balance of "+string(a), err)
	}
	return n, nil
}

const (
	selectStatement = `SELECT ` + transferColumns + ` FROM transfers WHERE (debit = ? OR credit = ?) AND seq < ? ORDER BY seq DESC LIMIT ?`
	selectSeq       = `SELECT seq FROM transfers WHERE id = ?`
	selectAfter     = `SELECT
  (SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE credit = ? AND seq > ?) -
  (SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE debit = ? AND seq > ?)`
)

// Statement lists the transfers of account a, newest first, at most limit,
// before the transfer of id before ("" for the newest), each with the
// balance a had right after it.
func (s *Store) Statement(ctx context.Context, a seckill.FundsAccount, before string, limit int) ([]seckill.StatementLine, error) {
	var lines []seckill.StatementLine
	err := s.InTx(ctx, func(ctx context.Context) error { // one snapshot: the balances agree with the rows
		from := int64(1) << 62
		if before != "" {
			if err := sqlx.GetContext(ctx, s.q(ctx), &from, selectSeq, before); err != nil {
				return seckill.Errorf(seckill.CodeInvalid, "No transfer %q to list before.", before)
			}
		}
		var rows []transferRow
		if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, selectStatement, a, a, from, limit); err != nil {
			return failed("statement of "+string(a), err)
		}
		if len(rows) == 0 {
			return nil
		}
		total, err := s.FundsBalance(ctx, a)
		if err != nil {
			return err
		}
		var later int64 // what moved after the newest row listed
		if err := sqlx.GetContext(ctx, s.q(ctx), &later, selectAfter, a, rows[0].Seq, a, rows[0].Seq); err != nil {
			return failed("statement of "+string(a), err)
		}
		bal := total - later
		for _, r := range rows {
			t := r.transfer()
			lines = append(lines, seckill.StatementLine{Transfer: t, Seq: r.Seq, BalanceAfter: bal})
			if t.Credit == a {
				bal -= t.Amount
			} else {
				bal += t.Amount
			}
		}
		return nil
	})
	return lines, err
}

const selectOrderTransfers = `SELECT ` + transferColumns + ` FROM transfers WHERE order_id = ? ORDER BY seq`

// OrderTransfers lists the transfers of an order (its charge, its fee, a
// refund, a void), oldest first.
func (s *Store) OrderTransfers(ctx context.Context, order string) ([]seckill.Transfer, error) {
	return all(ctx, s, transferRow.transfer, "transfers of order "+order, selectOrderTransfers, order)
}

const selectTransfersSince = `SELECT ` + transferColumns + ` FROM transfers WHERE at >= ? ORDER BY seq`

// MovementsSince returns the movements whose transfers the ledger holds
// from since on, as they were decided in Redis (their side: the wallet a
// charge debits or a top-up or credit credits, the merchant a refund or
// a payout debits; a void's, the side of the movement it undoes: the
// account its first transfer gives back to). For rebuilding Redis's
// records of movements made, which a retry finds (funds.Store.Remember);
// O(transfers since).
func (s *Store) MovementsSince(ctx context.Context, since time.Time) ([]seckill.Movement, error) {
	ts, err := all(ctx, s, func(r transferRow) transferRow { return r }, "transfers since "+since.String(), selectTransfersSince, since.UTC())
	if err != nil {
		return nil, err
	}
	var out []seckill.Movement
	at := map[string]int{} // movement id → index in out
	for _, r := range ts {
		i, ok := at[r.MovementID]
		if !ok {
			i = len(out)
			at[r.MovementID] = i
			out = append(out, seckill.Movement{ID: r.MovementID})
		}
		m := &out[i]
		t := r.transfer()
		m.Transfers = append(m.Transfers, t)
		switch t.Kind {
		case seckill.TransferCharge, seckill.TransferRefund, seckill.TransferPayout:
			m.Side = t.Debit
		case seckill.TransferTopup, seckill.TransferCredit:
			m.Side = t.Credit
		}
	}
	// A void undoes a charge or a payout (funds.Store.Cancel), decided on
	// its side: the account its first transfer, the reversed charge or
	// payout, credits back; the movement's own side when it is listed too.
	for i := range out {
		m := &out[i]
		of, ok := seckill.Voided(m.ID)
		if !ok || m.Transfers[0].Kind != seckill.TransferVoid {
			continue
		}
		m.Side = m.Transfers[0].Credit
		if j, ok := at[of]; ok && out[j].Side != "" {
			m.Side = out[j].Side
		}
	}
	kept := out[:0]
	for _, m := range out {
		if m.Side != "" {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

// topupRow is a row of the topups table.
type topupRow struct {
	ID          string    `db:"id"`
	UserID      string    `db:"user_id"`
	RequestID   string    `db:"request_id"`
	Amount      int64     `db:"amount_cents"`
	Currency    string    `db:"currency"`
	Status      string    `db:"status"`
	ProviderRef *string   `db:"provider_ref"`
	CheckoutURL *string   `db:"checkout_url"`
	CreatedAt   time.Time `db:"created_at"`
	UpdatedAt   time.Time `db:"updated_at"`
}

func (r topupRow) topup() seckill.Topup {
	return seckill.Topup{ID: r.ID, UserID: r.UserID, RequestID: r.RequestID, Amount: r.Amount, Currency: r.Currency,
		Status: seckill.TopupStatus(r.Status), ProviderRef: deref(r.ProviderRef), CheckoutURL: deref(r.CheckoutURL),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

const (
	topupColumns      = `id, user_id, request_id, amount_cents, currency, status, provider_ref, checkout_url, created_at, updated_at`
	insertTopup       = `INSERT INTO topups (id, user_id, request_id, amount_cents, currency, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)`
	selectTopup       = `SELECT ` + topupColumns + ` FROM topups WHERE id = ?`
	selectTopupByReq  = `SELECT ` + topupColumns + ` FROM topups WHERE user_id = ? AND request_id = ?`
	updateTopupPage   = `UPDATE topups SET provider_ref = ?, checkout_url = ?, updated_at = ? WHERE id = ?`
	updateTopupStatus = `UPDATE topups SET status = ?, updated_at = ? WHERE id = ? AND status = 'pending'`
)

// ErrNoTopup is an unknown top-up, or another user's.
var ErrNoTopup = seckill.Errorf(seckill.CodeNotFound, "No such top-up.")

// InsertTopup stores a new pending top-up; one that exists for the same
// user and request id is returned instead (created false).
func (s *Store) InsertTopup(ctx context.Context, t seckill.Topup) (seckill.Topup, bool, error) {
	now := t.CreatedAt.UTC().Truncate(time.Millisecond)
	_, err := s.q(ctx).ExecContext(ctx, insertTopup, t.ID, t.UserID, t.RequestID, t.Amount, t.Currency, now, now)
	if Duplicate(err) {
		got, err := s.TopupByRequest(ctx, t.UserID, t.RequestID)
		return got, false, err
	}
	if err != nil {
		return seckill.Topup{}, false, failed("create top-up", err)
	}
	got, err := s.Topup(ctx, t.ID)
	return got, true, err
}

// Topup returns one top-up, or ErrNoTopup.
func (s *Store) Topup(ctx context.Context, id string) (seckill.Topup, error) {
	return one(ctx, s, topupRow.topup, ErrNoTopup, "top-up "+id, selectTopup, id)
}

// TopupByRequest returns a user's top-up of a request id, or ErrNoTopup.
func (s *Store) TopupByRequest(ctx context.Context, user, request string) (seckill.Topup, error) {
	return one(ctx, s, topupRow.topup, ErrNoTopup, "top-up of request "+request, selectTopupByReq, user, request)
}

// SetTopupCheckout keeps where a top-up is paid at the provider.
func (s *Store) SetTopupCheckout(ctx context.Context, id, ref, url string, now time.Time) error {
	if _, err := s.q(ctx).ExecContext(ctx, updateTopupPage, ref, url, now.UTC(), id); err != nil {
		return failed("top-up "+id, err)
	}
	return nil
}

// SetTopupStatus ends a pending top-up as status; ok is false when it was
// not pending (ended before).
func (s *Store) SetTopupStatus(ctx context.Context, id string, status seckill.TopupStatus, now time.Time) (bool, error) {
	return s.changeRow(ctx, "top-up "+id, updateTopupStatus, status, now.UTC(), id)
}

// selectChargeAnomalies finds the orders whose money disagrees with their
// status: a paid or refunded order charged other than once, a refunded
// one without its refund (when the merchant kept something), a cancelled
// one whose charge was not voided. O(orders with money), for the
// reconciler.
const selectChargeAnomalies = `SELECT o.id, o.status,
  SUM(CASE WHEN t.kind = 'charge' THEN 1 ELSE 0 END) AS charges,
  SUM(CASE WHEN t.kind = 'refund' THEN 1 ELSE 0 END) AS refunds,
  SUM(CASE WHEN t.kind = 'void' AND t.credit LIKE 'wallet:%' THEN 1 ELSE 0 END) AS voids
FROM orders o LEFT JOIN transfers t ON t.order_id = o.id
WHERE o.charge_id IS NOT NULL OR t.id IS NOT NULL
GROUP BY o.id, o.status`

// ChargeAnomaly is an order whose transfers disagree with its status.
type ChargeAnomaly struct {
	OrderID string `db:"id"`
	Status  string `db:"status"`
	Charges int64  `db:"charges"`
	Refunds int64  `db:"refunds"`
	Voids   int64  `db:"voids"`
}

// ChargeAnomalies lists the orders with transfers whose count disagrees
// with the order's status: paid, one charge and no refund; refunded, one
// charge and at most one refund; cancelled, a charge only with its void;
// pending, none (a charge sets its order paid in the transaction that
// writes it).
func (s *Store) ChargeAnomalies(ctx context.Context) ([]ChargeAnomaly, error) {
	var rows []ChargeAnomaly
	if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, selectChargeAnomalies); err != nil {
		return nil, failed("check the orders' charges", err)
	}
	var out []ChargeAnomaly
	for _, r := range rows {
		ok := false
		switch seckill.OrderStatus(r.Status) {
		case seckill.OrderPaid:
			ok = r.Charges == 1 && r.Refunds == 0
		case seckill.OrderRefunded:
			ok = r.Charges == 1 && r.Refunds <= 1
		case seckill.OrderCancelled:
			ok = r.Charges == r.Voids && r.Charges <= 1 && r.Refunds == 0
		case seckill.OrderPending:
			ok = r.Charges == 0 && r.Refunds == 0
		}
		if !ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// payoutRow is a row of the payouts table.
type payoutRow struct {
	ID          string     `db:"id"`
	MerchantID  int64      `db:"merchant_id"`
	RequestID   string     `db:"request_id"`
	Amount      int64      `db:"amount_cents"`
	Account     string     `db:"account"`
	Currency    string     `db:"currency"`
	Status      string     `db:"status"`
	ProviderRef *string    `db:"provider_ref"`
	ReturnedAt  *time.Time `db:"returned_at"`
	CreatedAt   time.Time  `db:"created_at"`
}

func (r payoutRow) payout() seckill.Payout {
	return seckill.Payout{ID: r.ID, MerchantID: r.MerchantID, RequestID: r.RequestID, Amount: r.Amount, Account: r.Account,
		Currency: r.Currency, Status: seckill.PayoutStatus(r.Status), ProviderRef: deref(r.ProviderRef), ReturnedAt: r.ReturnedAt,
		CreatedAt: r.CreatedAt}
}

const (
	payoutColumns = `id, merchant_id, request_id, amount_cents, account, currency, status, provider_ref, returned_at, created_at`
	insertPayout  = `INSERT INTO payouts (id, merchant_id, request_id, amount_cents, account, currency, status, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`
	selectPayout       = `SELECT ` + payoutColumns + ` FROM payouts WHERE id = ?`
	selectPayoutByReq  = `SELECT ` + payoutColumns + ` FROM payouts WHERE merchant_id = ? AND request_id = ?`
	updatePayoutStatus = `UPDATE payouts SET status = ?, provider_ref = ?, updated_at = ? WHERE id = ? AND status = 'pending'`
	updatePayoutBack   = `UPDATE payouts SET returned_at = ?, updated_at = ? WHERE id = ? AND status = 'failed' AND returned_at IS NULL`
	// The payouts a sweep finishes: pending since before a moment (the
	// provider not reached, the process gone), refused without their
	// money back.
	selectStalePayouts = `SELECT ` + payoutColumns + ` FROM payouts
WHERE status = 'pending' AND updated_at < ? OR status = 'failed' AND returned_at IS NULL ORDER BY updated_at LIMIT ?`
	// A merchant's money that a void may still take back: charges to it of
	// orders the ledger shows pending, or cancelled without their void.
	// Since a charge sets its order paid in the transaction that writes it,
	// only orders cancelled under the earlier payment design (a charge then
	// committed apart from its status) can be so: a guard while their
	// voids drain.
	selectUnsettled = `SELECT COALESCE(SUM(t.amount_cents), 0) FROM transfers t JOIN orders o ON o.id = t.order_id
WHERE t.credit = ? AND t.kind = 'charge' AND (o.status = 'pending' OR o.status = 'cancelled' AND NOT EXISTS
  (SELECT 1 FROM transfers v WHERE v.order_id = o.id AND v.kind = 'void' AND v.debit = t.credit))`
	selectAccountBalance = `SELECT (SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE credit = ?) -
  (SELECT COALESCE(SUM(amount_cents), 0) FROM transfers WHERE debit = ?)`
)

// ErrNoPayout is an unknown payout, or another merchant's.
var ErrNoPayout = seckill.Errorf(seckill.CodeNotFound, "No such payout.")

// InsertPayout stores a new pending payout; one that exists for the same
// merchant and request id is returned instead (created false).
func (s *Store) InsertPayout(ctx context.Context, p seckill.Payout) (seckill.Payout, bool, error) {
	now := p.CreatedAt.UTC().Truncate(time.Millisecond)
	_, err := s.q(ctx).ExecContext(ctx, insertPayout, p.ID, p.MerchantID, p.RequestID, p.Amount, p.Account, p.Currency, now, now)
	if Duplicate(err) {
		got, err := one(ctx, s, payoutRow.payout, ErrNoPayout, "payout of request "+p.RequestID, selectPayoutByReq, p.MerchantID, p.RequestID)
		return got, false, err
	}
	if err != nil {
		return seckill.Payout{}, false, failed("create payout", err)
	}
	got, err := s.Payout(ctx, p.ID)
	return got, true, err
}

// Payout returns one payout, or ErrNoPayout.
func (s *Store) Payout(ctx context.Context, id string) (seckill.Payout, error) {
	return one(ctx, s, payoutRow.payout, ErrNoPayout, "payout "+id, selectPayout, id)
}

// SetPayoutStatus ends a pending payout as status with the provider's
// reference; ok is false when it was not pending.
func (s *Store) SetPayoutStatus(ctx context.Context, id string, status seckill.PayoutStatus, ref string, now time.Time) (bool, error) {
	return s.changeRow(ctx, "payout "+id, updatePayoutStatus, status, orNull(ref), now.UTC(), id)
}

// SetPayoutReturned records that a failed payout's money is back.
func (s *Store) SetPayoutReturned(ctx context.Context, id string, now time.Time) error {
	_, err := s.changeRow(ctx, "payout "+id, updatePayoutBack, now.UTC(), now.UTC(), id)
	return err
}

// StalePayouts lists at most limit payouts to finish: pending since
// before, or failed without their money back; the oldest first.
func (s *Store) StalePayouts(ctx context.Context, before time.Time, limit int) ([]seckill.Payout, error) {
	var rows []payoutRow
	if err := sqlx.SelectContext(ctx, s.q(ctx), &rows, selectStalePayouts, before.UTC(), limit); err != nil {
		return nil, failed("stale payouts", err)
	}
	out := make([]seckill.Payout, len(rows))
	for i, r := range rows {
		out[i] = r.payout()
	}
	return out, nil
}

// Unsettled is what account a received by charges that a void may still
// take back (orders not paid yet, or cancelled and not voided in the
// ledger yet): not to be paid out.
func (s *Store) Unsettled(ctx context.Context, a seckill.FundsAccount) (int64, error) {
	var n int64
	if err := sqlx.GetContext(ctx, s.q(ctx), &n, selectUnsettled, a); err != nil {
		return 0, failed("unsettled charges of "+string(a), err)
	}
	return n, nil
}

// AccountBalance is what account a holds by the ledger: its credits less
// its debits.
func (s *Store) AccountBalance(ctx context.Context, a seckill.FundsAccount) (int64, error) {
	var n int64
	if err := sqlx.GetContext(ctx, s.q(ctx), &n, selectAccountBalance, a, a); err != nil {
		return 0, failed("balance of "+string(a), err)
	}
	return n, nil
}
