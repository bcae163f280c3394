package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
)

// OrderBook holds the shoppers' orders (sales.Service): each shopper's
// own, paid for through it; Named names an order's sale.
type OrderBook interface {
	Orders(ctx context.Context, user string) ([]seckill.Order, error)
	Order(ctx context.Context, id, user string) (seckill.Order, error)
	Pay(ctx context.Context, id, user string) (seckill.Order, error)
	Named(ctx context.Context, id int64) (seckill.Sale, error)
}

// orderJSON is an order as the API shows it.
type orderJSON struct {
	OrderID     string              `json:"order_id"`
	SaleID      int64               `json:"sale_id"`
	SaleName    string              `json:"sale_name,omitempty"`
	Item        string              `json:"item,omitempty"`
	UserID      string              `json:"user_id"`
	Qty         int64               `json:"qty"`
	AmountCents int64               `json:"amount_cents"`
	Status      seckill.OrderStatus `json:"status"`
	Persisted   bool                `json:"persisted"`
	CreatedAt   time.Time           `json:"created_at"`
	ExpiresAt   time.Time           `json:"expires_at"`
	PaidAt      *time.Time          `json:"paid_at,omitempty"`
	CancelledAt *time.Time          `json:"cancelled_at,omitempty"`
	ChargeID    string              `json:"charge_id,omitempty"`
	RefundedAt  *time.Time          `json:"refunded_at,omitempty"`
}

func orderView(o seckill.Order) orderJSON {
	return orderJSON{
		OrderID: o.ID, SaleID: o.SaleID, UserID: o.UserID, Qty: o.Qty, AmountCents: o.AmountCents,
		Status: o.Status, Persisted: !o.PersistedAt.IsZero(), CreatedAt: o.CreatedAt.UTC(), ExpiresAt: o.ExpiresAt.UTC(),
		PaidAt: utc(o.PaidAt), CancelledAt: utc(o.CancelledAt), ChargeID: o.ChargeID, RefundedAt: utc(o.RefundedAt),
	}
}

// named adds the name and item of its sale to an order shown to its
// shopper (left out if the sale cannot be read just now).
func (s *Server) named(c *gin.Context, o orderJSON) orderJSON {
	if sl, err := s.Sales.Named(c.Request.Context(), o.SaleID); err == nil {
		o.SaleName, o.Item = sl.Name, sl.Item
	}
	return o
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (s *Server) listOrders(c *gin.Context) {
	os, err := s.Sales.Orders(c.Request.Context(), currentUser(c).ID)
	if err != nil {
		abort(c, err)
		return
	}
	out := make([]orderJSON, len(os))
	for i, o := range os {
		out[i] = s.named(c, orderView(o))
	}
	c.JSON(http.StatusOK, gin.H{"orders": out})
}

// getOrder shows one of the caller's orders, also one accepted by Redis
// that the worker has not written to the ledger yet.
func (s *Server) getOrder(c *gin.Context) {
	o, err := s.Sales.Order(c.Request.Context(), c.Param("id"), currentUser(c).ID)
	s.writeOrder(c, o, err)
}

// payOrder marks an order paid, if it is the caller's and its payment
// window is open. Paying twice is fine; paying a cancelled order is not.
func (s *Server) payOrder(c *gin.Context) {
	o, err := s.Sales.Pay(c.Request.Context(), c.Param("id"), currentUser(c).ID)
	s.metrics.payments.WithLabelValues(outcome(c, err)).Inc()
	s.writeOrder(c, o, err)
}

func (s *Server) writeOrder(c *gin.Context, o seckill.Order, err error) {
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, s.named(c, orderView(o)))
}
