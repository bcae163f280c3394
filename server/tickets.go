package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/tickets"
)

// Tickets hands out the proof-of-work challenges and buy tickets
// (tickets.Service).
type Tickets interface {
	Challenge(ctx context.Context, sale int64, user string) (tickets.Challenge, error)
	Ticket(ctx context.Context, sale int64, user string, solution func() (ch, nonce string, err error)) (tickets.Ticket, error)
}

type challengeJSON struct {
	Challenge  string    `json:"challenge"`
	Difficulty int       `json:"difficulty"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// challenge hands out a proof-of-work challenge for an open sale that asks
// for one (package tickets).
func (s *Server) challenge(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	ch, err := s.Tickets.Challenge(c.Request.Context(), id, currentUser(c).ID)
	if err != nil {
		abort(c, err)
		return
	}
	s.Outcomes.Add(id, sales.ChallengeIssued)
	c.JSON(http.StatusOK, challengeJSON{Challenge: ch.Challenge, Difficulty: ch.Difficulty, ExpiresAt: ch.ExpiresAt.UTC()})
}

type ticketRequest struct {
	Challenge *string `json:"challenge"`
	Nonce     *string `json:"nonce"`
}

type ticketJSON struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ticket hands out a buy ticket for an open sale, for a solved challenge
// when the sale asks for a proof of work.
func (s *Server) ticket(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	// The body is read once the sale is known to be open.
	t, err := s.Tickets.Ticket(c.Request.Context(), id, currentUser(c).ID, func() (string, string, error) {
		var req ticketRequest
		if err := decode(c, &req); err != nil {
			return "", "", err
		}
		if req.Challenge != nil && req.Nonce != nil {
			return *req.Challenge, *req.Nonce, nil
		}
		return "", "", nil
	})
	if err != nil {
		if seckill.CodeOf(err) == seckill.CodePowInvalid {
			s.Outcomes.Add(id, string(seckill.CodePowInvalid))
		}
		abort(c, err)
		return
	}
	if t.Solved {
		s.Outcomes.Add(id, sales.ChallengeSolved)
	}
	s.Outcomes.Add(id, sales.TicketIssued)
	c.JSON(http.StatusOK, ticketJSON{Ticket: t.Ticket, ExpiresAt: t.ExpiresAt.UTC()})
}
