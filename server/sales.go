package server

import (
	"context"
	"fmt"
	"net/http"
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
	Bought(ctx context.Context, id int64, user string) (int64, error)
}

// SaleChanges changes the sales (sales.Service), each change audited and
// limited to what the request's actor may change.
type SaleChanges interface {
	Create(ctx context.Context, in seckill.SaleInput) (sales.View, error)
	Update(ctx context.Context, id int64, in seckill.SaleInput) (sales.View, error)
	Restock(ctx context.Context, id, qty int64) (sales.View, error)
	Act(ctx context.Context, id int64, a seckill.Action) (sales.View, error)
	SetImage(ctx context.Context, id int64, raw []byte) (sales.View, error)
	RemoveImage(ctx context.Context, id int64) (sales.View, error)
	Image(ctx context.Context, id int64) (seckill.SaleImage, error)
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
	// InstantCheckout: a buy charges the wallet (API.md, Instant checkout).
	InstantCheckout bool `json:"instant_checkout"`
	// RequireTicket and PowDifficulty tell the shopper page what a buy
	// needs (API.md, buy tickets).
	RequireTicket bool `json:"require_ticket"`
	PowDifficulty int  `json:"pow_difficulty"`
	VerifiedOnly  bool `json:"verified_only"`
	// The waiting room (API.md, Waiting room).
	WaitingRoom    bool      `json:"waiting_room"`
	QueueOpensAt   time.Time `json:"queue_opens_at"`
	AdmitPerSecond int64     `json:"admit_per_second"`
	// Description tells about the item ("" none); ImageURL is its
	// product image, a URL that changes with the image ("" none).
	Description string `json:"description"`
	ImageURL    string `json:"image_url,omitempty"`
	// Currency is the ISO 4217 code of price_cents (the deployment's).
	Currency string `json:"currency"`
	// MerchantID is whose sale it is (0: the operator's); admin views only.
	MerchantID *int64    `json:"merchant_id,omitempty"`
	ServerTime time.Time `json:"server_time"`
}

// saleView shows a sale with its live stock at now, its price in the
// deployment's currency; to an admin with its merchant too.
func (s *Server) saleView(v sales.View, now time.Time, admin bool) saleJSON {
	sl, st := v.Sale, v.Stock
	j := saleJSON{
		ID: sl.ID, Name: sl.Name, Item: sl.Item, PriceCents: sl.PriceCents,
		Total: st.Total, Remaining: max(0, st.Available), Sold: st.Sold, PerUserLimit: sl.PerUserLimit,
		StartsAt: sl.StartsAt.UTC(), EndsAt: sl.EndsAt.UTC(), Status: v.Phase(now), Buckets: sl.Buckets,
		InstantCheckout: sl.InstantCheckout,
		RequireTicket:   sl.RequireTicket, PowDifficulty: sl.PowDifficulty, VerifiedOnly: sl.VerifiedOnly,
		WaitingRoom: sl.WaitingRoom, QueueOpensAt: sl.QueueOpensAt.UTC(), AdmitPerSecond: sl.AdmitPerSecond, ServerTime: now.UTC(),
		Description: sl.Description, Currency: s.cfg.Currency,
	}
	if sl.ImageETag != "" {
		j.ImageURL = fmt.Sprintf("/api/sales/%d/image?v=%s", sl.ID, sl.ImageETag)
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
		out[i] = s.saleView(v, now, admin)
	}
	c.JSON(http.StatusOK, gin.H{"sales": out})
}

// getSale shows a sale to shoppers; its row may be a second old.
func (s *Server) getSale(c *gin.Context) { s.showSale(c, s.Sales.Find, false) }

// mine answers GET /api/sales/:id/mine: the units the caller holds in
// the sale, which its per-user limit counts.
func (s *Server) mine(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	n, err := s.Sales.Bought(c.Request.Context(), id, currentUser(c).ID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"sale_id": id, "bought": n})
}

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
	c.JSON(http.StatusOK, s.saleView(v, s.Now(), admin))
}

// writeSale answers an admin request with a sale, or with err.
func (s *Server) writeSale(c *gin.Context, status int, v sales.View, err error) {
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(status, s.saleView(v, s.Now(), true))
}

func (s *Server) createSale(c *gin.Context) {
	var in seckill.SaleInput
	if err := decode(c, &in); err != nil {
		abort(c, err)
		return
	}
	v, err := s.Sales.Create(c.Request.Context(), in)
	s.writeSale(c, http.StatusCreated, v, err)
}

func (s *Server) updateSale(c *gin.Context) {
	var in seckill.SaleInput
	if err := decode(c, &in); err != nil {
		abort(c, err)
		return
	}
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	v, err := s.Sales.Update(c.Request.Context(), id, in)
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
