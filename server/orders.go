package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/orders"
)

// orderJSON is an order as the API shows it.
type orderJSON struct {
	OrderID     string     `json:"order_id"`
	SaleID      int64      `json:"sale_id"`
	UserID      string     `json:"user_id"`
	Qty         int64      `json:"qty"`
	AmountCents int64      `json:"amount_cents"`
	Status      string     `json:"status"`
	Persisted   bool       `json:"persisted"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
}

func orderView(o orders.Order) orderJSON {
	return orderJSON{
		OrderID: o.ID, SaleID: o.SaleID, UserID: o.UserID, Qty: o.Qty, AmountCents: o.AmountCents,
		Status: o.Status, Persisted: true, CreatedAt: o.CreatedAt.UTC(), ExpiresAt: o.ExpiresAt.UTC(),
		PaidAt: utc(o.PaidAt), CancelledAt: utc(o.CancelledAt),
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// orderListLimit is the most orders the list shows.
const orderListLimit = 200

func (s *Server) listOrders(c *gin.Context) {
	os, err := s.ledger.UserOrders(c.Request.Context(), currentUser(c).ID, orderListLimit)
	if err != nil {
		abort(c, classify(err))
		return
	}
	out := make([]orderJSON, len(os))
	for i, o := range os {
		out[i] = orderView(o)
	}
	c.JSON(http.StatusOK, gin.H{"orders": out})
}

// getOrder shows one of the caller's orders, also one accepted by Redis
// that the worker has not written to MySQL yet.
func (s *Server) getOrder(c *gin.Context) {
	ctx := c.Request.Context()
	id, user := c.Param("id"), currentUser(c).ID
	o, err := s.ledger.Order(ctx, id)
	switch {
	case err == nil && o.UserID == user:
		c.JSON(http.StatusOK, orderView(o))
		return
	case err == nil:
		abort(c, orders.ErrNotFound)
		return
	case !errors.Is(err, orders.ErrNotFound):
		abort(c, classify(err))
		return
	}
	view, err := s.unpersistedOrder(ctx, id, user)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, view)
}

// unpersistedOrder finds an order in its sale's Redis record of accepted
// orders.
func (s *Server) unpersistedOrder(ctx context.Context, id, user string) (orderJSON, error) {
	sale := orders.SaleOf(id)
	if sale == 0 {
		return orderJSON{}, orders.ErrNotFound
	}
	acc, ok, err := s.inv.Accepted(ctx, sale, id, user)
	if err != nil {
		return orderJSON{}, classify(err)
	}
	if !ok || acc.UserID != user {
		return orderJSON{}, orders.ErrNotFound
	}
	var price int64
	if st, err := s.inv.Stock(ctx, sale); err == nil {
		price = st.PriceCents
	}
	amount, err := orders.Amount(acc.Qty, price)
	if err != nil {
		return orderJSON{}, err
	}
	return orderJSON{
		OrderID: id, SaleID: sale, UserID: user, Qty: acc.Qty, AmountCents: amount,
		Status: orders.StatusPending, Persisted: false,
		CreatedAt: acc.At.UTC(), ExpiresAt: acc.At.Add(s.cfg.PaymentWindow).UTC(),
	}, nil
}

// persistWait bounds how long paying an order waits for the worker to
// write it; the pipeline normally takes milliseconds.
const persistWait = 3 * time.Second

// payOrder marks an order paid, if it is the caller's and its payment
// window is open. Paying twice is fine; paying a cancelled order is not.
func (s *Server) payOrder(c *gin.Context) {
	ctx := c.Request.Context()
	id, user := c.Param("id"), currentUser(c).ID
	o, err := s.ledger.Pay(ctx, id, user, s.now())
	if errors.Is(err, orders.ErrNotFound) {
		// Maybe accepted but not persisted yet: wait for the worker.
		if _, uerr := s.unpersistedOrder(ctx, id, user); uerr != nil {
			abort(c, uerr)
			return
		}
		if err = s.awaitPersisted(ctx, id); err == nil {
			o, err = s.ledger.Pay(ctx, id, user, s.now())
		}
	}
	if err != nil {
		abort(c, classify(err))
		return
	}
	c.JSON(http.StatusOK, orderView(o))
}

func (s *Server) awaitPersisted(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, persistWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.ledger.Order(ctx, id)
		if !errors.Is(err, orders.ErrNotFound) {
			return err
		}
		select {
		case <-ctx.Done():
			return unavailable(errors.New("order accepted but not yet recorded; retry shortly"))
		case <-tick.C:
		}
	}
}

// saleStats are a sale's figures for the merchant's dashboard.
type saleStats struct {
	SaleID          int64            `json:"sale_id"`
	Total           int64            `json:"total"`
	Sold            int64            `json:"sold"`
	Remaining       int64            `json:"remaining"`
	Status          string           `json:"status"`
	OrdersPersisted int64            `json:"orders_persisted"`
	OrdersPending   int64            `json:"orders_pending"`
	OrdersPaid      int64            `json:"orders_paid"`
	OrdersCancelled int64            `json:"orders_cancelled"`
	Outcomes        map[string]int64 `json:"outcomes"`
	Defence         defence          `json:"defence"`
	// DeadLetters is the size of the dead-letter queue (all sales): orders
	// the worker gave up on, to look into with seckill deadletters.
	DeadLetters *int      `json:"dead_letters,omitempty"`
	At          time.Time `json:"at"`
}

func (s *Server) saleStats(c *gin.Context) {
	ctx := c.Request.Context()
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	sl, err := s.ledger.Sale(ctx, id)
	if err != nil {
		abort(c, classify(err))
		return
	}
	led, err := s.ledger.Ledger(ctx, id)
	if err != nil {
		abort(c, classify(err))
		return
	}
	views, err := s.views(ctx, []orders.Sale{sl})
	if err != nil {
		abort(c, err)
		return
	}
	out, err := s.outcomes.read(ctx, id)
	if err != nil {
		abort(c, classify(err))
		return
	}
	def := defenceOf(out)
	if def.FirstCapped, err = s.outcomes.firstCapped(ctx, id, 10); err != nil {
		abort(c, classify(err))
		return
	}
	v := views[0]
	var dead *int
	if s.dead != nil {
		if n, err := s.dead(ctx); err == nil {
			dead = &n
		}
	}
	c.JSON(http.StatusOK, saleStats{
		SaleID: id, Total: v.Total, Sold: v.Sold, Remaining: v.Remaining, Status: v.Status,
		OrdersPersisted: led.Orders[orders.StatusPending] + led.Orders[orders.StatusPaid] + led.Orders[orders.StatusCancelled],
		OrdersPending:   led.Orders[orders.StatusPending],
		OrdersPaid:      led.Orders[orders.StatusPaid],
		OrdersCancelled: led.Orders[orders.StatusCancelled],
		Outcomes:        out,
		Defence:         def,
		DeadLetters:     dead,
		At:              s.now().UTC(),
	})
}
