// Package sales is the application: the operations merchants and shoppers
// run on sales and their orders, between the HTTP adapter (package server)
// and the stores: the ledger (package orders) and the live stock (package
// inventory), behind the small interfaces this package declares. It owns
// each change of a sale: it opens the ledger's transaction, applies the
// domain's rule (package seckill), calls the store's plain methods in
// order, records the audit row (package audit) and makes the change in
// Redis last, the same way for every kind of change, so a change is made
// in the ledger and in Redis together or not at all. It also counts what
// the buy path answered, for the merchant's dashboard.
package sales

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill"
)

// Ledger is where sales and orders are kept for good (orders.Store): its
// methods run in the transaction InTx puts in their context.
type Ledger interface {
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	InsertSale(ctx context.Context, sale seckill.Sale, now time.Time) (seckill.Sale, error)
	SaleForUpdate(ctx context.Context, id int64) (seckill.Sale, error)
	UpdateSale(ctx context.Context, sale seckill.Sale, now time.Time) error
	AddMovement(ctx context.Context, sale int64, order string, delta int64, reason seckill.Reason, now time.Time) error
	Sale(ctx context.Context, id int64) (seckill.Sale, error)
	Sales(ctx context.Context, endedAfter time.Time, limit int) ([]seckill.Sale, error)
	MerchantSales(ctx context.Context, merchant int64, limit int) ([]seckill.Sale, error)
	Merchant(ctx context.Context, id int64) (seckill.Merchant, error)
	SoldHistory(ctx context.Context, sale int64, from, to time.Time, n int) ([]int64, error)
	Totals(ctx context.Context, sale int64) (seckill.Totals, error)
	Order(ctx context.Context, id string) (seckill.Order, error)
	UserOrders(ctx context.Context, user string, limit int) ([]seckill.Order, error)
	OrderForUpdate(ctx context.Context, id string) (seckill.Order, error)
	SetPaid(ctx context.Context, id, chargeID string, now time.Time) (bool, error)
	// A sale's product image (sales/images.go).
	SetSaleImage(ctx context.Context, img seckill.SaleImage, now time.Time) error
	SaleImage(ctx context.Context, sale int64) (seckill.SaleImage, error)
}

// Wallets are the balances money moves between in Redis (funds.Store):
// a payment is one movement, decided on the buyer's wallet, and made
// means paid.
type Wallets interface {
	Move(ctx context.Context, m seckill.Movement) (int64, bool, error)
	Made(ctx context.Context, side seckill.FundsAccount, id string) (bool, error)
}

// Auditor records a change in the audit log, in the transaction of the
// change (audit.Service).
type Auditor interface {
	Record(ctx context.Context, e seckill.AuditEntry) error
}

// Stock is the sales' live state in Redis (inventory.Store).
type Stock interface {
	Warm(ctx context.Context, sale seckill.Sale) (int64, error)
	Restock(ctx context.Context, sale, qty int64) (int64, error)
	SetStatus(ctx context.Context, sale int64, action seckill.Action) (seckill.Status, error)
	Stock(ctx context.Context, sale int64) (seckill.Stock, error)
	Stocks(ctx context.Context, sales []int64) (map[int64]seckill.Stock, error)
	Charging(ctx context.Context, sale int64, orderID, user string) (e seckill.Event, merchant int64, ok bool, err error)
	Bought(ctx context.Context, sale int64, user string) (int64, error)
	Outcomes(ctx context.Context, sale int64) (map[string]int64, error)
	FirstCapped(ctx context.Context, sale int64, n int64) ([]seckill.CappedUser, error)
	ReadQueue(ctx context.Context, sale int64, user string, now time.Time, gone bool) (seckill.Queue, error)
	BuyerCount(ctx context.Context, sale int64) (int64, error)
}

// Config tunes a Service.
type Config struct {
	// PaymentWindow is how long a buyer has to pay an order.
	PaymentWindow time.Duration
	// FeeBps is the platform's share of each payment, in basis points.
	FeeBps int64
}

// Service runs the operations on sales and orders.
type Service struct {
	ledger  Ledger
	stock   Stock
	wallets Wallets
	audit   Auditor
	cfg     Config
	now     func() time.Time

	// rows are sales' ledger rows for the shoppers' pages, a second old at
	// most; rules their stock for the buy path's bot-defence settings.
	rows  *cache[seckill.Sale]
	rules *cache[seckill.Stock]
	// pictures are the product images served last (images.go).
	pictures pictures
}

// New returns a Service on the clock now.
func New(ledger Ledger, stock Stock, wallets Wallets, audit Auditor, cfg Config, now func() time.Time) *Service {
	return &Service{
		ledger: ledger, stock: stock, wallets: wallets, audit: audit, cfg: cfg, now: now,
		// A sale missing from the ledger is remembered too: a page asking
		// for it again and again does not turn into a query per request.
		rows: newCache(ledger.Sale, func(err error) bool { return errors.Is(err, seckill.ErrSaleNotFound) }, now),
		// A sale missing from Redis is not: it may be created the next
		// moment, and its first buyers must find it.
		rules: newCache(stock.Stock, func(error) bool { return false }, now),
	}
}

// View is a sale with its live stock. A sale without stock in Redis (its
// keys expired long after its end, or Redis lost them) shows no units
// left (seckill.StockOf).
type View struct {
	Sale  seckill.Sale
	Stock seckill.Stock
}

// Phase is the sale's state as shoppers see it now.
func (v View) Phase(now time.Time) seckill.Phase { return v.Stock.PhaseAt(now) }

// views joins sales with their stock, read in one round trip.
func (s *Service) views(ctx context.Context, sales []seckill.Sale) ([]View, error) {
	ids := make([]int64, len(sales))
	for i, sl := range sales {
		ids[i] = sl.ID
	}
	stocks, err := s.stock.Stocks(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]View, len(sales))
	for i, sl := range sales {
		st, ok := stocks[sl.ID]
		if !ok {
			st = seckill.StockOf(sl)
		}
		out[i] = View{Sale: sl, Stock: st}
	}
	return out, nil
}

func (s *Service) view(ctx context.Context, sl seckill.Sale) (View, error) {
	vs, err := s.views(ctx, []seckill.Sale{sl})
	if err != nil {
		return View{}, err
	}
	return vs[0], nil
}

// publicRetention is how long an ended sale stays in the public list.
const publicRetention = 24 * time.Hour

// Public lists the sales shoppers see: newest first, those that ended
// within a day included, at most 100.
func (s *Service) Public(ctx context.Context) ([]View, error) {
	return s.list(ctx, s.now().Add(-publicRetention), 100)
}

// All lists every sale for the merchant, newest first, at most 500.
// A merchant's own only.
func (s *Service) All(ctx context.Context) ([]View, error) {
	if a := seckill.ActorOf(ctx); a.Role == seckill.RoleMerchant {
		sales, err := s.ledger.MerchantSales(ctx, a.MerchantID, 500)
		if err != nil {
			return nil, err
		}
		return s.views(ctx, sales)
	}
	return s.list(ctx, time.Time{}, 500)
}

func (s *Service) list(ctx context.Context, endedAfter time.Time, limit int) ([]View, error) {
	sales, err := s.ledger.Sales(ctx, endedAfter, limit)
	if err != nil {
		return nil, err
	}
	return s.views(ctx, sales)
}

// Get returns a sale fresh from the ledger, with its stock.
func (s *Service) Get(ctx context.Context, id int64) (View, error) {
	sl, err := s.ledger.Sale(ctx, id)
	if err != nil {
		return View{}, err
	}
	if err := owned(ctx, sl); err != nil {
		return View{}, err
	}
	return s.view(ctx, sl)
}

// HistoryPoint is the units sold by a time.
type HistoryPoint struct {
	At   time.Time
	Sold int64
}

// historySlices is how many points a sale's history has.
const historySlices = 60

// History returns the units a sale sold from its start until now (or its
// end), in historySlices points: the dashboard's chart from the opening,
// not from when the page was opened.
func (s *Service) History(ctx context.Context, id int64) ([]HistoryPoint, error) {
	v, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	from, to := v.Sale.StartsAt, s.now()
	if v.Sale.EndsAt.Before(to) {
		to = v.Sale.EndsAt
	}
	if !to.After(from) {
		return []HistoryPoint{}, nil
	}
	sold, err := s.ledger.SoldHistory(ctx, id, from, to, historySlices)
	if err != nil {
		return nil, err
	}
	out := make([]HistoryPoint, 0, len(sold)+1)
	out = append(out, HistoryPoint{At: from})
	step := to.Sub(from) / historySlices
	for i, n := range sold {
		out = append(out, HistoryPoint{At: from.Add(step * time.Duration(i+1)), Sold: n})
	}
	return out, nil
}

// errHandOver is a merchant giving its sale to another.
var errHandOver = seckill.Errorf(seckill.CodeForbidden, "Only the operator hands a sale to another merchant.")

// merchantExists refuses a sale handed to a merchant that does not exist
// (0, the operator's, always does).
func (s *Service) merchantExists(ctx context.Context, id int64) error {
	if id == 0 {
		return nil
	}
	_, err := s.ledger.Merchant(ctx, id)
	if errors.Is(err, seckill.ErrNoMerchant) {
		return seckill.Invalid(seckill.FieldError{Field: "merchant_id", Message: "no merchant has this id"})
	}
	return err
}

// owned refuses a sale that is not the acting merchant's exactly as an
// unknown one, so its id tells nothing: this is where ownership is
// enforced, for every admin read and change.
func owned(ctx context.Context, sl seckill.Sale) error {
	if !seckill.ActorOf(ctx).Owns(sl.MerchantID) {
		return seckill.ErrSaleNotFound
	}
	return nil
}

// Find returns a sale for shoppers, with its stock: its row may be a
// second old.
func (s *Service) Find(ctx context.Context, id int64) (View, error) {
	sl, err := s.rows.get(ctx, id)
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, sl)
}

// Bought is the units user holds in a sale, as its per-user cap counts
// them (Redis, not the ledger: a shopper's page asks it on every visit,
// at a drop's opening too).
func (s *Service) Bought(ctx context.Context, id int64, user string) (int64, error) {
	return s.stock.Bought(ctx, id, user)
}

// Named returns a sale's row as of a second ago at most: its name and
// item for a shopper's orders.
func (s *Service) Named(ctx context.Context, id int64) (seckill.Sale, error) {
	return s.rows.get(ctx, id)
}

// Exists says whether a sale exists (seckill.ErrSaleNotFound if not), as
// of a second ago at most.
func (s *Service) Exists(ctx context.Context, id int64) error {
	_, err := s.rows.get(ctx, id)
	return err
}

// Stock returns a sale's stock now.
func (s *Service) Stock(ctx context.Context, id int64) (seckill.Stock, error) {
	return s.stock.Stock(ctx, id)
}

// Rules returns a sale's stock as of a second ago at most, for the
// settings every buy checks (require_ticket): a change applies everywhere
// within a second, and the buy path never reads the ledger.
func (s *Service) Rules(ctx context.Context, id int64) (seckill.Stock, error) {
	return s.rules.get(ctx, id)
}

// Create stores a new sale made from in (seckill.SaleInput.NewSale), with
// its initial stock movement and its audit row, and loads its stock into
// Redis before it returns; if Redis refuses, nothing is stored. A
// merchant's sale is its own; the operator may name its merchant.
func (s *Service) Create(ctx context.Context, in seckill.SaleInput) (View, error) {
	sl, err := in.NewSale()
	if err != nil {
		return View{}, err
	}
	if a := seckill.ActorOf(ctx); a.Role == seckill.RoleMerchant {
		if sl.MerchantID != 0 && sl.MerchantID != a.MerchantID {
			return View{}, errHandOver
		}
		sl.MerchantID = a.MerchantID
	}
	if err := s.merchantExists(ctx, sl.MerchantID); err != nil {
		return View{}, err
	}
	err = s.ledger.InTx(ctx, func(ctx context.Context) error {
		now := s.now().UTC().Truncate(time.Millisecond)
		if sl, err = s.ledger.InsertSale(ctx, sl, now); err != nil {
			return err
		}
		if err := s.ledger.AddMovement(ctx, sl.ID, "", sl.Total, seckill.ReasonInitial, now); err != nil {
			return err
		}
		_, after := seckill.SaleChanges(seckill.Sale{}, sl)
		if err := s.audit.Record(ctx, seckill.AuditEntry{Action: seckill.AuditSaleCreate, SaleID: sl.ID, Owner: sl.MerchantID, After: after}); err != nil {
			return err
		}
		_, err := s.stock.Warm(ctx, sl) // Redis last: a failure of the ledger never leaves it changed alone
		return err
	})
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, sl)
}

// Update changes a sale's settings as in says (seckill.SaleInput.Change:
// the total changes by Restock only, the buckets never; the waiting room's
// setup only before the start), in the ledger and in Redis.
func (s *Service) Update(ctx context.Context, id int64, in seckill.SaleInput) (View, error) {
	p, err := in.Change()
	if err != nil {
		return View{}, err
	}
	return s.change(ctx, id, seckill.AuditSalePatch, func(ctx context.Context, sl seckill.Sale) (seckill.Sale, error) {
		if p.MerchantID != nil && *p.MerchantID != sl.MerchantID {
			if seckill.ActorOf(ctx).Role == seckill.RoleMerchant {
				return sl, errHandOver
			}
			if err := s.merchantExists(ctx, *p.MerchantID); err != nil {
				return sl, err
			}
		}
		return sl.Patched(p, s.now())
	}, func(_, after seckill.Sale) error {
		_, err := s.stock.Warm(ctx, after)
		return err
	})
}

// Restock adds qty units to a sale, atomically, also while it runs.
func (s *Service) Restock(ctx context.Context, id, qty int64) (View, error) {
	if err := seckill.ValidRestock(0, qty); err != nil {
		return View{}, err // before any lock: the amount alone is wrong
	}
	return s.change(ctx, id, seckill.AuditSaleRestock, func(_ context.Context, sl seckill.Sale) (seckill.Sale, error) {
		return sl.Restocked(qty)
	}, func(before, _ seckill.Sale) error {
		_, err := s.stock.Restock(ctx, before.ID, qty)
		return err
	})
}

// Act pauses, resumes or ends a sale (an ended sale stays ended:
// seckill.ErrEnded). Redis, which every part of the sale's stock obeys,
// must come to the status the domain's rule gives.
func (s *Service) Act(ctx context.Context, id int64, a seckill.Action) (View, error) {
	return s.change(ctx, id, seckill.AuditSaleAction(a), func(_ context.Context, sl seckill.Sale) (seckill.Sale, error) {
		var err error
		sl.Status, err = sl.Status.After(a)
		return sl, err
	}, func(_, after seckill.Sale) error {
		st, err := s.stock.SetStatus(ctx, after.ID, a)
		if err == nil && st != after.Status {
			err = fmt.Errorf("sales: %s sale %d: Redis says %s, the ledger %s", a, after.ID, st, after.Status)
		}
		return err
	})
}

// stepRoom brings a sale's waiting room up to now, as its stock is before
// a change to it: the time until then counted as it was (let in while
// open, not while paused or sold out), so that a pause or a sold-out spell
// nobody watched lets in nobody when it ends.
func (s *Service) stepRoom(ctx context.Context, sl seckill.Sale) error {
	if !sl.WaitingRoom {
		return nil
	}
	st, err := s.stock.Stock(ctx, sl.ID)
	if errors.Is(err, seckill.ErrSaleNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	now := s.now()
	_, err = s.stock.ReadQueue(ctx, sl.ID, "", now, st.PhaseAt(now) == seckill.PhaseSoldOut)
	return err
}

// change runs one change of a sale, the same way for every kind: in one
// ledger transaction it locks the sale's row, refuses a sale the actor
// does not own, brings its waiting room up to now, asks edit (in the
// transaction: ctx carries it) for the sale
// as it is to be (the domain's rule; the id, buckets and creation time
// stay), writes it with a restock movement for units added, records the
// audit row (the fields before and after; the row the old owner's), and
// last, before the commit, makes the change in Redis (redis). If any step
// fails, nothing changes and its error is returned. Then it forgets what
// the caches held.
func (s *Service) change(ctx context.Context, id int64, action string, edit func(context.Context, seckill.Sale) (seckill.Sale, error),
	redis func(before, after seckill.Sale) error) (View, error) {
	var after seckill.Sale
	err := s.ledger.InTx(ctx, func(ctx context.Context) error {
		before, err := s.ledger.SaleForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if err := owned(ctx, before); err != nil {
			return err
		}
		if err := s.stepRoom(ctx, before); err != nil {
			return err
		}
		if after, err = edit(ctx, before); err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Millisecond)
		after.ID, after.Buckets, after.CreatedAt, after.UpdatedAt = before.ID, before.Buckets, before.CreatedAt, now
		if err := s.ledger.UpdateSale(ctx, after, now); err != nil {
			return err
		}
		if added := after.Total - before.Total; added > 0 {
			if err := s.ledger.AddMovement(ctx, id, "", added, seckill.ReasonRestock, now); err != nil {
				return err
			}
		}
		was, is := seckill.SaleChanges(before, after)
		if err := s.audit.Record(ctx, seckill.AuditEntry{Action: action, SaleID: id, Owner: before.MerchantID, Before: was, After: is}); err != nil {
			return err
		}
		return redis(before, after)
	})
	if err != nil {
		return View{}, err
	}
	s.rows.forget(id)
	s.rules.forget(id)
	return s.view(ctx, after)
}
