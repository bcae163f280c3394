package server

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
)

type buyRequest struct {
	Qty       int64  `json:"qty"`
	RequestID string `json:"request_id"`
	Ticket    string `json:"ticket"`
}

type buyResponse struct {
	OrderID   string `json:"order_id"`
	SaleID    int64  `json:"sale_id"`
	Qty       int64  `json:"qty"`
	Remaining int64  `json:"remaining"`
	Status    string `json:"status"`
}

// rateLimit applies the buy limiters (per IP, per user, global).
func (s *Server) rateLimit(c *gin.Context) {
	ip := ""
	if s.limits.perIP != nil { // the client's address is worked out only when a limiter needs it
		ip = c.ClientIP()
	}
	ok, wait := s.limits.allow(currentUser(c).ID, ip, s.now())
	if ok {
		c.Next()
		return
	}
	if id, err := strconv.ParseInt(c.Param("id"), 10, 64); err == nil && id > 0 {
		s.outcomes.add(id, "rate_limited")
	}
	s.metrics.outcomes.WithLabelValues("rate_limited").Inc()
	e := newError(http.StatusTooManyRequests, "rate_limited", "Too many requests; retry in a moment.")
	e.RetryAfter = wait
	abort(c, e)
}

// buyInput reads and validates a buy; false means it was refused.
func (s *Server) buyInput(c *gin.Context) (int64, buyRequest, bool) {
	id, err := saleID(c)
	if err != nil {
		s.refuse(c, 0, err)
		return 0, buyRequest{}, false
	}
	req, err := decodeBuy(c)
	if err != nil {
		s.refuse(c, id, err)
		return 0, buyRequest{}, false
	}
	switch {
	case req.Qty < 1:
		err = invalid("qty must be at least 1.")
	case req.Qty > orders.MaxTotal:
		// No sale has this many units, so no limit allows it.
		err = inventory.ErrLimitExceeded
	case !orders.ValidRequestID(req.RequestID):
		err = invalid("request_id must be 8 to 64 characters of A-Z, a-z, 0-9, _ and -.")
	}
	if err != nil {
		s.refuse(c, id, err)
		return 0, buyRequest{}, false
	}
	return id, req, true
}

// buy decides one purchase: validate, then one (possibly coalesced) Lua call.
func (s *Server) buy(c *gin.Context) {
	id, req, ok := s.buyInput(c)
	if !ok {
		return
	}
	u := currentUser(c)
	if err := s.checkBuyTicket(c.Request.Context(), id, u.ID, req.Ticket); err != nil {
		s.refuse(c, id, err)
		return
	}
	res, err := s.reserver.Reserve(c.Request.Context(), id, []inventory.Request{{
		UserID: u.ID, Qty: req.Qty, RequestID: req.RequestID,
	}})
	if err != nil {
		s.refuse(c, id, classify(err))
		return
	}
	r := res[0]
	if r.Err != nil {
		s.refuse(c, id, r.Err)
		return
	}
	s.outcomes.add(id, "ok")
	s.metrics.outcomes.WithLabelValues("ok").Inc()
	writeBought(c, buyResponse{OrderID: r.OrderID, SaleID: id, Qty: r.Qty, Remaining: r.Remaining, Status: orders.StatusPending})
}

// writeBought answers an accepted buy, its JSON written by hand: order ids
// and statuses are plain ASCII, and this is the other half of the answers
// a flash sale gives.
func writeBought(c *gin.Context, r buyResponse) {
	b := make([]byte, 0, 128)
	b = append(b, `{"order_id":"`...)
	b = append(b, r.OrderID...)
	b = append(b, `","sale_id":`...)
	b = strconv.AppendInt(b, r.SaleID, 10)
	b = append(b, `,"qty":`...)
	b = strconv.AppendInt(b, r.Qty, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, r.Remaining, 10)
	b = append(b, `,"status":"`...)
	b = append(b, r.Status...)
	b = append(b, "\"}"...)
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
}

// refuse answers a buy with err and counts the outcome.
func (s *Server) refuse(c *gin.Context, sale int64, err error) {
	code := errorOf(c, err).Code
	if sale > 0 && code != "sale_not_found" {
		s.outcomes.add(sale, code)
		if code == "limit_exceeded" {
			s.outcomes.hitCap(sale, currentUser(c).ID, s.now())
		}
	}
	s.metrics.outcomes.WithLabelValues(code).Inc()
	abort(c, err)
}

// AddBaselineRoute adds POST /api/sales/{id}/baseline for the benchmark
// suite: the buy route's whole middleware chain and input validation, then
// a fixed answer without touching Redis. Call it before serving.
func (s *Server) AddBaselineRoute() {
	s.api.POST("/sales/:id/baseline", s.requireUser, s.rateLimit, func(c *gin.Context) {
		id, req, ok := s.buyInput(c)
		if !ok {
			return
		}
		c.JSON(http.StatusOK, buyResponse{OrderID: "baseline", SaleID: id, Qty: req.Qty, Status: orders.StatusPending})
	})
}
