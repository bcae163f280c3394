package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sales"
)

// SaleFigures are a sale's figures for the merchant's dashboard
// (sales.Service): its stats and the units sold over time.
type SaleFigures interface {
	Stats(ctx context.Context, id int64) (sales.Stats, error)
	History(ctx context.Context, id int64) ([]sales.HistoryPoint, error)
}

// statsJSON are a sale's figures for the merchant's dashboard.
type statsJSON struct {
	SaleID          int64            `json:"sale_id"`
	Total           int64            `json:"total"`
	Sold            int64            `json:"sold"`
	Remaining       int64            `json:"remaining"`
	Status          seckill.Phase    `json:"status"`
	OrdersPersisted int64            `json:"orders_persisted"`
	OrdersPending   int64            `json:"orders_pending"`
	OrdersPaid      int64            `json:"orders_paid"`
	OrdersCancelled int64            `json:"orders_cancelled"`
	Outcomes        map[string]int64 `json:"outcomes"`
	Defence         defenceJSON      `json:"defence"`
	// Queue is the waiting room's figures, for a sale with one.
	Queue *queueStatsJSON `json:"queue,omitempty"`
	// DeadLetters is the size of the dead-letter queue (all sales): orders
	// the worker gave up on, to look into with seckill deadletters.
	DeadLetters *int      `json:"dead_letters,omitempty"`
	At          time.Time `json:"at"`
}

// queueStatsJSON are a waiting room's figures (sales.QueueStats).
type queueStatsJSON struct {
	Size              int64 `json:"size"`
	Admitted          int64 `json:"admitted"`
	JoinedBeforeStart int64 `json:"joined_before_start"`
	PassesUsed        int64 `json:"passes_used"`
	AdmitPerSecond    int64 `json:"admit_per_second"`
}

// defenceJSON is what a sale's bot defence saw (sales.Defence).
type defenceJSON struct {
	TicketRequired   int64        `json:"ticket_required"`
	TicketInvalid    int64        `json:"ticket_invalid"`
	ChallengesIssued int64        `json:"challenges_issued"`
	ChallengesSolved int64        `json:"challenges_solved"`
	PowInvalid       int64        `json:"pow_invalid"`
	TicketsIssued    int64        `json:"tickets_issued"`
	FirstCapped      []cappedJSON `json:"first_capped"`
}

type cappedJSON struct {
	UserID string    `json:"user_id"`
	At     time.Time `json:"at"`
}

func (s *Server) saleStats(c *gin.Context) {
	ctx := c.Request.Context()
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	st, err := s.Sales.Stats(ctx, id)
	if err != nil {
		abort(c, err)
		return
	}
	var dead *int
	// The dead letters are every sale's: the operator's to see.
	if s.DeadLetters != nil && seckill.ActorOf(ctx).Role == seckill.RoleOperator {
		if n, err := s.DeadLetters(ctx); err == nil {
			dead = &n
		}
	}
	now := s.Now()
	v := s.saleView(st.View, now, true)
	var queue *queueStatsJSON
	if q := st.Queue; q != nil {
		queue = &queueStatsJSON{Size: q.Size, Admitted: q.Admitted, JoinedBeforeStart: q.JoinedBeforeStart,
			PassesUsed: q.PassesUsed, AdmitPerSecond: q.AdmitPerSecond}
	}
	c.JSON(http.StatusOK, statsJSON{
		SaleID: id, Total: v.Total, Sold: v.Sold, Remaining: v.Remaining, Status: v.Status,
		OrdersPersisted: st.Totals.Persisted(),
		OrdersPending:   st.Totals.Orders[seckill.OrderPending],
		OrdersPaid:      st.Totals.Orders[seckill.OrderPaid],
		OrdersCancelled: st.Totals.Orders[seckill.OrderCancelled],
		Outcomes:        st.Outcomes,
		Defence:         defenceView(st.Defence),
		Queue:           queue,
		DeadLetters:     dead,
		At:              now.UTC(),
	})
}

func defenceView(d sales.Defence) defenceJSON {
	out := defenceJSON{
		TicketRequired: d.TicketRequired, TicketInvalid: d.TicketInvalid, ChallengesIssued: d.ChallengesIssued,
		ChallengesSolved: d.ChallengesSolved, PowInvalid: d.PowInvalid, TicketsIssued: d.TicketsIssued,
		FirstCapped: make([]cappedJSON, len(d.FirstCapped)),
	}
	for i, u := range d.FirstCapped {
		out.FirstCapped[i] = cappedJSON{UserID: u.UserID, At: u.At}
	}
	return out
}

// saleHistory answers GET /admin/api/sales/{id}/history: the units sold
// from the sale's start until now, {"points": [{"at", "sold"}]}.
func (s *Server) saleHistory(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	pts, err := s.Sales.History(c.Request.Context(), id)
	if err != nil {
		abort(c, err)
		return
	}
	out := make([]gin.H, len(pts))
	for i, p := range pts {
		out[i] = gin.H{"at": p.At.UTC(), "sold": p.Sold}
	}
	c.JSON(http.StatusOK, gin.H{"points": out})
}
