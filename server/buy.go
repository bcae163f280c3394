package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/internal/tracing"
)

// Outcomes counts each sale's outcomes for its dashboard (sales.Outcomes):
// in memory, flushed to Redis while Run runs.
type Outcomes interface {
	// Add counts one outcome (a code, or an event of the bot defence).
	Add(sale int64, name string)
	// HitCap notes a user refused for the per-user cap.
	HitCap(sale int64, user string, now time.Time)
	Run(ctx context.Context)
}

type buyRequest struct {
	Qty       int64  `json:"qty"`
	RequestID string `json:"request_id"`
	Ticket    string `json:"ticket"`
	Pass      string `json:"pass"`
}

type buyResponse struct {
	OrderID   string `json:"order_id"`
	SaleID    int64  `json:"sale_id"`
	Qty       int64  `json:"qty"`
	Remaining int64  `json:"remaining"`
	Status    string `json:"status"`
	ChargeID  string `json:"charge_id,omitempty"`
}

// tooManyRequests is the message of a buy limiter's refusal.
const tooManyRequests = "Too many requests; retry in a moment."

// rateLimit applies the buy limiters (per IP, per user, global).
func (s *Server) rateLimit(c *gin.Context) {
	ip := ""
	if s.limits.perIP != nil { // the client's address is worked out only when a limiter needs it
		ip = c.ClientIP()
	}
	ok, wait := s.limits.allow(currentUser(c).ID, ip, s.Now())
	if ok {
		c.Next()
		return
	}
	if id, err := strconv.ParseInt(c.Param("id"), 10, 64); err == nil && id > 0 {
		s.Outcomes.Add(id, string(seckill.CodeRateLimited))
	}
	s.metrics.outcomes.WithLabelValues(string(seckill.CodeRateLimited)).Inc()
	abort(c, rateLimited(tooManyRequests, wait))
}

// Refusals of a buy's body besides the decoder's.
var (
	errQty       = invalid("qty must be at least 1.")
	errRequestID = invalid("request_id must be 8 to 64 characters of A-Z, a-z, 0-9, _ and -.")
)

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
		err = errQty
	case req.Qty > seckill.MaxTotal:
		// No sale has this many units, so no limit allows it.
		err = seckill.ErrLimitExceeded
	case !seckill.ValidRequestID(req.RequestID):
		err = errRequestID
	}
	if err != nil {
		s.refuse(c, id, err)
		return 0, buyRequest{}, false
	}
	return id, req, true
}

// buy decides one purchase: validate, then the buy chain (the gate's
// rules, one possibly coalesced Lua call). The buyer is verified as the
// session says; the gate looks again at an account refused as not
// verified.
func (s *Server) buy(c *gin.Context) {
	id, req, ok := s.buyInput(c)
	if !ok {
		return
	}
	u := currentUser(c)
	b := seckill.Buy{UserID: u.ID, Qty: req.Qty, RequestID: req.RequestID, Ticket: req.Ticket, Pass: req.Pass, Verified: u.Verified,
		Trace: tracing.Traceparent(c.Request.Context())}
	d, err := s.Buys.Reserve(c.Request.Context(), id, []seckill.Buy{b})
	if err != nil {
		s.refuse(c, id, err)
		return
	}
	a := d.Answers[0]
	s.count(c, id, a.Code)
	if a.Code != seckill.CodeOK {
		sendAnswer(c, answerOf(a.Code), nil)
		return
	}
	r := buyResponse{OrderID: a.OrderID, SaleID: id, Qty: a.Qty, Remaining: a.Remaining, Status: string(seckill.OrderPending)}
	if a.ChargeID != "" { // instant checkout: born paid
		r.Status, r.ChargeID = string(seckill.OrderPaid), a.ChargeID
	}
	writeBought(c, r)
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
	if r.ChargeID != "" {
		b = append(b, `","charge_id":"`...)
		b = append(b, r.ChargeID...)
	}
	b = append(b, "\"}"...)
	c.Data(http.StatusOK, "application/json; charset=utf-8", b)
}

// refuse answers a buy with err and counts the outcome.
func (s *Server) refuse(c *gin.Context, sale int64, err error) {
	a := answerFor(c, err)
	s.count(c, sale, a.code)
	sendAnswer(c, a, err)
}

// count counts a buy's outcome: in the metrics, and on the sale's
// dashboard unless the sale is unknown; a refusal for the cap also notes
// its user.
func (s *Server) count(c *gin.Context, sale int64, code seckill.Code) {
	if sale > 0 && code != seckill.CodeSaleNotFound {
		s.Outcomes.Add(sale, string(code))
		if code == seckill.CodeLimitExceeded {
			s.Outcomes.HitCap(sale, currentUser(c).ID, s.Now())
		}
	}
	s.metrics.outcomes.WithLabelValues(string(code)).Inc()
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
		c.JSON(http.StatusOK, buyResponse{OrderID: "baseline", SaleID: id, Qty: req.Qty, Status: string(seckill.OrderPending)})
	})
}
