package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sales"
)

// SaleCatalog reads the sales (sales.Service): as shoppers see them
// (Public, Find: a second old at most) and as the merchant does (All,
// Get: fresh from the ledger); Exists before the live stock of one.
type SaleCatalog interface {
	Public(ctx context.Context) ([]sales.View, error)
	All(ctx context.Context) ([]sales.View, error)
	Find(ctx context.Context, id int64) (sales.View, error)
	Get(ctx context.Context, id int64) (sales.View, error)
	Exists(ctx context.Context, id int64) error
}

// SaleChanges changes the sales (sales.Service), each change audited and
// limited to what the request's actor may change.
type SaleChanges interface {
	Create(ctx context.Context, sl seckill.Sale) (sales.View, error)
	Update(ctx context.Context, id int64, p seckill.SalePatch) (sales.View, error)
	Restock(ctx context.Context, id, qty int64) (sales.View, error)
	Act(ctx context.Context, id int64, a seckill.Action) (sales.View, error)
}

// saleJSON is a sale as the API shows it.
type saleJSON struct {
	ID           int64         `json:"id"`
	Name         string        `json:"name"`
	Item         string        `json:"item"`
	PriceCents   int64         `json:"price_cents"`
	Total        int64         `json:"total"`
	Remaining    int64         `json:"remaining"`
	Sold         int64         `json:"sold"`
	PerUserLimit int64         `json:"per_user_limit"`
	StartsAt     time.Time     `json:"starts_at"`
	EndsAt       time.Time     `json:"ends_at"`
	Status       seckill.Phase `json:"status"`
	Buckets      int           `json:"buckets"`
	// RequireTicket and PowDifficulty tell the shopper page what a buy
	// needs (API.md, buy tickets).
	RequireTicket bool `json:"require_ticket"`
	PowDifficulty int  `json:"pow_difficulty"`
	VerifiedOnly  bool `json:"verified_only"`
	// The waiting room (API.md, Waiting room).
	WaitingRoom    bool      `json:"waiting_room"`
	QueueOpensAt   time.Time `json:"queue_opens_at"`
	AdmitPerSecond int64     `json:"admit_per_second"`
	// MerchantID is whose sale it is (0: the operator's); admin views only.
	MerchantID *int64    `json:"merchant_id,omitempty"`
	ServerTime time.Time `json:"server_time"`
}

// saleView shows a sale with its live stock at now; to an admin with its
// merchant too.
func saleView(v sales.View, now time.Time, admin bool) saleJSON {
	sl, st := v.Sale, v.Stock
	j := saleJSON{
		ID: sl.ID, Name: sl.Name, Item: sl.Item, PriceCents: sl.PriceCents,
		Total: st.Total, Remaining: max(0, st.Available), Sold: st.Sold, PerUserLimit: sl.PerUserLimit,
		StartsAt: sl.StartsAt.UTC(), EndsAt: sl.EndsAt.UTC(), Status: v.Phase(now), Buckets: sl.Buckets,
		RequireTicket: sl.RequireTicket, PowDifficulty: sl.PowDifficulty, VerifiedOnly: sl.VerifiedOnly,
		WaitingRoom: sl.WaitingRoom, QueueOpensAt: sl.QueueOpensAt.UTC(), AdmitPerSecond: sl.AdmitPerSecond, ServerTime: now.UTC(),
	}
	if admin {
		j.MerchantID = &sl.MerchantID
	}
	return j
}

func (s *Server) listSales(c *gin.Context) { s.writeSales(c, s.Sales.Public, false) }

func (s *Server) adminListSales(c *gin.Context) { s.writeSales(c, s.Sales.All, true) }

func (s *Server) writeSales(c *gin.Context, list func(context.Context) ([]sales.View, error), admin bool) {
	vs, err := list(c.Request.Context())
	if err != nil {
		abort(c, err)
		return
	}
	now := s.Now()
	out := make([]saleJSON, len(vs))
	for i, v := range vs {
		out[i] = saleView(v, now, admin)
	}
	c.JSON(http.StatusOK, gin.H{"sales": out})
}

// getSale shows a sale to shoppers; its row may be a second old.
func (s *Server) getSale(c *gin.Context) { s.showSale(c, s.Sales.Find, false) }

// adminGetSale shows a sale to the merchant, fresh from the ledger.
func (s *Server) adminGetSale(c *gin.Context) { s.showSale(c, s.Sales.Get, true) }

func (s *Server) showSale(c *gin.Context, load func(context.Context, int64) (sales.View, error), admin bool) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	v, err := load(c.Request.Context(), id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, saleView(v, s.Now(), admin))
}

// writeSale answers an admin request with a sale, or with err.
func (s *Server) writeSale(c *gin.Context, status int, v sales.View, err error) {
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(status, saleView(v, s.Now(), true))
}

// saleRequest is the body of creating (every field required but buckets
// and the bot defence's) or patching (any field but total and buckets) a
// sale.
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
	// VerifiedOnly sells only to verified identities (optional on create).
	VerifiedOnly *bool `json:"verified_only"`
	// The waiting room (optional on create).
	WaitingRoom    *bool      `json:"waiting_room"`
	QueueOpensAt   *time.Time `json:"queue_opens_at"`
	AdmitPerSecond *int64     `json:"admit_per_second"`
	// MerchantID names the merchant whose sale it is (the operator only;
	// a merchant's sales are its own).
	MerchantID *int64 `json:"merchant_id"`
}

// patch is the request as a change to a sale. Names lose surrounding white
// space here, so what is validated is what is stored.
func (r saleRequest) patch() seckill.SalePatch {
	return seckill.SalePatch{Name: trimmed(r.Name), Item: trimmed(r.Item), PriceCents: r.PriceCents,
		PerUserLimit: r.PerUserLimit, StartsAt: r.StartsAt, EndsAt: r.EndsAt,
		RequireTicket: r.RequireTicket, PowDifficulty: r.PowDifficulty, VerifiedOnly: r.VerifiedOnly,
		WaitingRoom: r.WaitingRoom, QueueOpensAt: r.QueueOpensAt, AdmitPerSecond: r.AdmitPerSecond, MerchantID: r.MerchantID}
}

func trimmed(s *string) *string {
	if s == nil {
		return nil
	}
	t := strings.TrimSpace(*s)
	return &t
}

func (r saleRequest) missing() []seckill.FieldError {
	var fs []seckill.FieldError
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"name", r.Name != nil}, {"item", r.Item != nil}, {"price_cents", r.PriceCents != nil},
		{"total", r.Total != nil}, {"per_user_limit", r.PerUserLimit != nil},
		{"starts_at", r.StartsAt != nil}, {"ends_at", r.EndsAt != nil},
	} {
		if !f.set {
			fs = append(fs, seckill.FieldError{Field: f.name, Message: "is required"})
		}
	}
	return fs
}

func (s *Server) createSale(c *gin.Context) {
	var req saleRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	if fs := req.missing(); len(fs) > 0 {
		abort(c, seckill.Invalid(fs...))
		return
	}
	sale := seckill.Sale{Total: *req.Total, Buckets: 1}.Apply(req.patch())
	// Zeros given are out of range, not the defaults Create would give.
	var zero []seckill.FieldError
	if req.Buckets != nil {
		if *req.Buckets == 0 {
			zero = append(zero, seckill.FieldError{Field: "buckets", Message: "must be between 1 and 64"})
		}
		sale.Buckets = *req.Buckets
	}
	if req.AdmitPerSecond != nil && *req.AdmitPerSecond == 0 {
		zero = append(zero, seckill.FieldError{Field: "admit_per_second", Message: "must be between 1 and 100000"})
	}
	if req.QueueOpensAt != nil && req.QueueOpensAt.IsZero() {
		zero = append(zero, seckill.FieldError{Field: "queue_opens_at", Message: "must lie between the years 2000 and 9999"})
	}
	if len(zero) > 0 {
		abort(c, seckill.Invalid(zero...))
		return
	}
	v, err := s.Sales.Create(c.Request.Context(), sale)
	s.writeSale(c, http.StatusCreated, v, err)
}

func (s *Server) updateSale(c *gin.Context) {
	var req saleRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	var fixed []seckill.FieldError
	if req.Total != nil {
		fixed = append(fixed, seckill.FieldError{Field: "total", Message: "changes only by restock"})
	}
	if req.Buckets != nil {
		fixed = append(fixed, seckill.FieldError{Field: "buckets", Message: "is fixed when the sale is created"})
	}
	if len(fixed) > 0 {
		abort(c, seckill.Invalid(fixed...))
		return
	}
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	v, err := s.Sales.Update(c.Request.Context(), id, req.patch())
	s.writeSale(c, http.StatusOK, v, err)
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
	if err := seckill.ValidRestock(0, req.Qty); err != nil {
		abort(c, err)
		return
	}
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	v, err := s.Sales.Restock(c.Request.Context(), id, req.Qty)
	s.writeSale(c, http.StatusOK, v, err)
}

// act pauses, resumes or ends a sale.
func (s *Server) act(a seckill.Action) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := saleID(c)
		if err != nil {
			abort(c, err)
			return
		}
		v, err := s.Sales.Act(c.Request.Context(), id, a)
		s.writeSale(c, http.StatusOK, v, err)
	}
}
