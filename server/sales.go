package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

// saleJSON is a sale as the API shows it.
type saleJSON struct {
	ID           int64     `json:"id"`
	Name         string    `json:"name"`
	Item         string    `json:"item"`
	PriceCents   int64     `json:"price_cents"`
	Total        int64     `json:"total"`
	Remaining    int64     `json:"remaining"`
	Sold         int64     `json:"sold"`
	PerUserLimit int64     `json:"per_user_limit"`
	StartsAt     time.Time `json:"starts_at"`
	EndsAt       time.Time `json:"ends_at"`
	Status       string    `json:"status"`
	Buckets      int       `json:"buckets"`
	// RequireTicket and PowDifficulty tell the shopper page what a buy
	// needs (API.md, buy tickets).
	RequireTicket bool      `json:"require_ticket"`
	PowDifficulty int       `json:"pow_difficulty"`
	ServerTime    time.Time `json:"server_time"`
}

// saleView joins a sale's ledger row with its live stock. A sale without
// stock in Redis (its keys expired long after its end, or Redis lost them)
// shows no remaining units.
func saleView(sl orders.Sale, st inventory.Stock, hasStock bool, now time.Time) saleJSON {
	if !hasStock {
		st = inventory.Stock{Total: sl.Total, Sold: 0, Start: sl.StartsAt, End: sl.EndsAt, Status: sl.Status}
	}
	return saleJSON{
		ID: sl.ID, Name: sl.Name, Item: sl.Item, PriceCents: sl.PriceCents,
		Total: st.Total, Remaining: max(0, st.Available), Sold: st.Sold, PerUserLimit: sl.PerUserLimit,
		StartsAt: sl.StartsAt.UTC(), EndsAt: sl.EndsAt.UTC(), Status: st.StatusAt(now), Buckets: sl.Buckets,
		RequireTicket: sl.RequireTicket, PowDifficulty: sl.PowDifficulty, ServerTime: now.UTC(),
	}
}

func (s *Server) views(ctx context.Context, sales []orders.Sale) ([]saleJSON, error) {
	ids := make([]int64, len(sales))
	for i, sl := range sales {
		ids[i] = sl.ID
	}
	stocks, err := s.inv.Stocks(ctx, ids)
	if err != nil {
		return nil, classify(err)
	}
	now := s.now()
	out := make([]saleJSON, len(sales))
	for i, sl := range sales {
		st, ok := stocks[sl.ID]
		out[i] = saleView(sl, st, ok, now)
	}
	return out, nil
}

// publicSaleRetention is how long an ended sale stays in the public list.
const publicSaleRetention = 24 * time.Hour

func (s *Server) listSales(c *gin.Context) {
	s.writeSales(c, s.now().Add(-publicSaleRetention), 100)
}

func (s *Server) adminListSales(c *gin.Context) {
	s.writeSales(c, time.Time{}, 500)
}

func (s *Server) writeSales(c *gin.Context, endedAfter time.Time, limit int) {
	sales, err := s.ledger.Sales(c.Request.Context(), endedAfter, limit)
	if err != nil {
		abort(c, classify(err))
		return
	}
	views, err := s.views(c.Request.Context(), sales)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"sales": views})
}

// getSale shows a sale to shoppers; its row may be a second old (cache).
func (s *Server) getSale(c *gin.Context) { s.showSale(c, s.sales.get) }

// adminGetSale shows a sale to the merchant, fresh from MySQL.
func (s *Server) adminGetSale(c *gin.Context) { s.showSale(c, s.ledger.Sale) }

func (s *Server) showSale(c *gin.Context, load func(context.Context, int64) (orders.Sale, error)) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	sl, err := load(c.Request.Context(), id)
	if err != nil {
		abort(c, classify(err))
		return
	}
	s.writeSale(c, http.StatusOK, sl)
}

func (s *Server) writeSale(c *gin.Context, status int, sl orders.Sale) {
	views, err := s.views(c.Request.Context(), []orders.Sale{sl})
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(status, views[0])
}

// saleRequest is the body of creating (every field required but buckets)
// or patching (any field but total and buckets) a sale.
type saleRequest struct {
	Buckets      *int       `json:"buckets"`
	Name         *string    `json:"name"`
	Item         *string    `json:"item"`
	PriceCents   *int64     `json:"price_cents"`
	Total        *int64     `json:"total"`
	PerUserLimit *int64     `json:"per_user_limit"`
	StartsAt     *time.Time `json:"starts_at"`
	EndsAt       *time.Time `json:"ends_at"`
	// Bot defence (optional on create).
	RequireTicket *bool `json:"require_ticket"`
	PowDifficulty *int  `json:"pow_difficulty"`
}

// patch is the request as a change to a sale. Names lose surrounding white
// space here, so what is validated is what is stored.
func (r saleRequest) patch() orders.SalePatch {
	return orders.SalePatch{Name: trimmed(r.Name), Item: trimmed(r.Item), PriceCents: r.PriceCents,
		PerUserLimit: r.PerUserLimit, StartsAt: r.StartsAt, EndsAt: r.EndsAt,
		RequireTicket: r.RequireTicket, PowDifficulty: r.PowDifficulty}
}

func trimmed(s *string) *string {
	if s == nil {
		return nil
	}
	t := strings.TrimSpace(*s)
	return &t
}

func (r saleRequest) missing() []orders.FieldError {
	var fs []orders.FieldError
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"name", r.Name != nil}, {"item", r.Item != nil}, {"price_cents", r.PriceCents != nil},
		{"total", r.Total != nil}, {"per_user_limit", r.PerUserLimit != nil},
		{"starts_at", r.StartsAt != nil}, {"ends_at", r.EndsAt != nil},
	} {
		if !f.set {
			fs = append(fs, orders.FieldError{Field: f.name, Message: "is required"})
		}
	}
	return fs
}

// StockOf is what Redis needs to know of a sale; its keys live for keep
// after the sale's end.
func StockOf(sl orders.Sale, keep time.Duration) inventory.Sale {
	return inventory.Sale{
		ID: sl.ID, Total: sl.Total, Limit: sl.PerUserLimit, PriceCents: sl.PriceCents,
		Start: sl.StartsAt, End: sl.EndsAt, Status: sl.Status, Buckets: sl.Buckets,
		ExpireAt: sl.EndsAt.Add(keep), RequireTicket: sl.RequireTicket, PowDifficulty: sl.PowDifficulty,
	}
}

func (s *Server) stockOf(sl orders.Sale) inventory.Sale {
	return StockOf(sl, s.cfg.PaymentWindow+s.cfg.SaleRetention)
}

// CreateSale stores a new sale in MySQL and loads its stock into Redis; if
// Redis refuses, the MySQL row is rolled back.
func (s *Server) CreateSale(ctx context.Context, sl orders.Sale) (orders.Sale, error) {
	sl.Status = inventory.StatusActive
	if sl.Buckets == 0 {
		sl.Buckets = 1
	}
	if err := sl.Validate(); err != nil {
		return sl, err
	}
	err := s.ledger.InTx(ctx, func(tx *orders.Store) error {
		var err error
		if sl, err = tx.CreateSale(ctx, sl, s.now()); err != nil {
			return err
		}
		_, err = s.inv.Warm(ctx, s.stockOf(sl), false)
		return err
	})
	return sl, classify(err)
}

func (s *Server) createSale(c *gin.Context) {
	var req saleRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	if fs := req.missing(); len(fs) > 0 {
		abort(c, &orders.ValidationError{Fields: fs})
		return
	}
	sale := orders.Sale{Total: *req.Total, Buckets: 1}.Apply(req.patch())
	if req.Buckets != nil {
		if *req.Buckets == 0 { // out of range, not the default CreateSale would give
			abort(c, &orders.ValidationError{Fields: []orders.FieldError{{Field: "buckets", Message: "must be between 1 and 64"}}})
			return
		}
		sale.Buckets = *req.Buckets
	}
	sl, err := s.CreateSale(c.Request.Context(), sale)
	if err != nil {
		abort(c, err)
		return
	}
	s.writeSale(c, http.StatusCreated, sl)
}

// changeSale runs fn on a sale locked in a MySQL transaction; fn changes
// Redis as part of it, so a Redis refusal rolls the MySQL change back.
func (s *Server) changeSale(c *gin.Context, fn func(ctx context.Context, tx *orders.Store, sl *orders.Sale) error) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	ctx := c.Request.Context()
	var sl orders.Sale
	err = s.ledger.InTx(ctx, func(tx *orders.Store) error {
		var err error
		if sl, err = tx.SaleForUpdate(ctx, id); err != nil {
			return err
		}
		return fn(ctx, tx, &sl)
	})
	if err != nil {
		abort(c, classify(err))
		return
	}
	s.sales.forget(id)
	s.rules.forget(id)
	s.writeSale(c, http.StatusOK, sl)
}

func (s *Server) updateSale(c *gin.Context) {
	var req saleRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	var fixed []orders.FieldError
	if req.Total != nil {
		fixed = append(fixed, orders.FieldError{Field: "total", Message: "changes only by restock"})
	}
	if req.Buckets != nil {
		fixed = append(fixed, orders.FieldError{Field: "buckets", Message: "is fixed when the sale is created"})
	}
	if len(fixed) > 0 {
		abort(c, &orders.ValidationError{Fields: fixed})
		return
	}
	s.changeSale(c, func(ctx context.Context, tx *orders.Store, sl *orders.Sale) error {
		*sl = sl.Apply(req.patch())
		if err := sl.Validate(); err != nil {
			return err
		}
		if err := tx.UpdateSale(ctx, *sl, s.now()); err != nil {
			return err
		}
		_, err := s.inv.Warm(ctx, s.stockOf(*sl), false)
		return err
	})
}

type restockRequest struct {
	Qty int64 `json:"qty"`
}

func (s *Server) restock(c *gin.Context) {
	var req restockRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	if req.Qty < 1 || req.Qty > orders.MaxTotal {
		abort(c, &orders.ValidationError{Fields: []orders.FieldError{{Field: "qty", Message: "must be between 1 and 100000000"}}})
		return
	}
	s.changeSale(c, func(ctx context.Context, tx *orders.Store, sl *orders.Sale) error {
		if sl.Total+req.Qty > orders.MaxTotal {
			return &orders.ValidationError{Fields: []orders.FieldError{{Field: "qty", Message: "would take the total over 100000000"}}}
		}
		if err := tx.Restock(ctx, sl.ID, req.Qty, s.now()); err != nil {
			return err
		}
		sl.Total += req.Qty
		_, err := s.inv.Restock(ctx, sl.ID, req.Qty)
		return err
	})
}

// setStatus pauses, resumes or ends a sale.
func (s *Server) setStatus(action string) gin.HandlerFunc {
	return func(c *gin.Context) {
		s.changeSale(c, func(ctx context.Context, tx *orders.Store, sl *orders.Sale) error {
			st, err := s.inv.SetStatus(ctx, sl.ID, action)
			if err != nil {
				return err
			}
			sl.Status = st
			return tx.SetSaleStatus(ctx, sl.ID, st, s.now())
		})
	}
}

// saleCache keeps things read per sale (ledger rows, the bot-defence
// settings in Redis) for a second, so a sale page or a buy under load does
// not turn into a query per request. A missing sale is kept too (found is
// false for such errors); other errors are not.
type saleCache[V any] struct {
	load    func(context.Context, int64) (V, error)
	missing func(error) bool
	now     func() time.Time

	mu sync.Mutex
	m  map[int64]cached[V]
}

type cached[V any] struct {
	v   V
	err error
	at  time.Time
}

const (
	saleCacheTTL  = time.Second
	saleCacheSize = 10_000
)

func newSaleCache[V any](load func(context.Context, int64) (V, error), missing func(error) bool, now func() time.Time) *saleCache[V] {
	return &saleCache[V]{load: load, missing: missing, now: now, m: map[int64]cached[V]{}}
}

func (sc *saleCache[V]) get(ctx context.Context, id int64) (V, error) {
	now := sc.now()
	sc.mu.Lock()
	e, ok := sc.m[id]
	sc.mu.Unlock()
	if ok && now.Sub(e.at) < saleCacheTTL {
		return e.v, e.err
	}
	v, err := sc.load(ctx, id)
	if err != nil && !sc.missing(err) {
		return v, err
	}
	sc.mu.Lock()
	if len(sc.m) >= saleCacheSize {
		clear(sc.m)
	}
	sc.m[id] = cached[V]{v: v, err: err, at: now}
	sc.mu.Unlock()
	return v, err
}

func (sc *saleCache[V]) forget(id int64) {
	sc.mu.Lock()
	delete(sc.m, id)
	sc.mu.Unlock()
}
