package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/live"
	"github.com/seckill/seckill/room"
)

// Rooms runs the sales' waiting rooms (room.Service): shoppers join and
// read their standing here; the live-stock hub watches each room.
type Rooms interface {
	Join(ctx context.Context, sale int64, user string) (room.Standing, error)
	Read(ctx context.Context, sale int64, user string) (room.Standing, error)
	live.Rooms
}

// queueJSON is a shopper's standing in a sale's waiting room (API.md,
// Waiting room).
type queueJSON struct {
	SaleID          int64 `json:"sale_id"`
	Place           int64 `json:"place"`
	AdmittedThrough int64 `json:"admitted_through"`
	QueueSize       int64 `json:"queue_size"`
	// JoinedBeforeStart lets a page that joined early estimate its final
	// place from the frames' (place × final / now) until it reads it.
	JoinedBeforeStart int64               `json:"joined_before_start"`
	ETASeconds        int64               `json:"eta_seconds"`
	Status            seckill.QueueStatus `json:"status"`
	Pass              string              `json:"pass,omitempty"`
	PassExpiresAt     *time.Time          `json:"pass_expires_at,omitempty"`
}

func queueView(st room.Standing) queueJSON {
	j := queueJSON{SaleID: st.SaleID, Place: st.Place, AdmittedThrough: st.AdmittedThrough, QueueSize: st.Size,
		JoinedBeforeStart: st.JoinedBeforeStart, ETASeconds: room.Seconds(st.ETA), Status: st.Status, Pass: st.Pass}
	if st.Pass != "" {
		at := st.PassExpiresAt.UTC()
		j.PassExpiresAt = &at
	}
	return j
}

// joinQueue puts the shopper in the sale's waiting room (again: the same
// place).
func (s *Server) joinQueue(c *gin.Context) { s.queueStep(c, s.Room.Join) }

// readQueue says where the shopper stands, with a pass once admitted.
func (s *Server) readQueue(c *gin.Context) { s.queueStep(c, s.Room.Read) }

func (s *Server) queueStep(c *gin.Context, step func(ctx context.Context, sale int64, user string) (room.Standing, error)) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	st, err := step(c.Request.Context(), id, currentUser(c).ID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, queueView(st))
}
