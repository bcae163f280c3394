package server

import (
	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/live"
)

// newLive is the live-stock hub the server mounts, configured from cfg.
func newLive(cfg Config, d Deps) *live.Hub {
	return live.New(live.Config{
		Poll: cfg.WSPoll, MaxPerIP: cfg.WSMaxPerIP, MaxTotal: cfg.WSMaxTotal,
		Origins: append(append([]string(nil), cfg.PublicOrigins...), cfg.AllowedOrigins...),
		Hosts:   live.HostsOf(cfg.PublicOrigins), Addr: cfg.Addr,
	}, d.Sales, d.Room, d.Now, d.Registry)
}

// serveWS upgrades GET /ws/sales/{id} to the sale's live stock (package
// live), or answers why not.
func (s *Server) serveWS(c *gin.Context) {
	id, err := saleID(c)
	if err != nil {
		abort(c, err)
		return
	}
	if err := s.Sales.Exists(c.Request.Context(), id); err != nil {
		abort(c, err)
		return
	}
	if err := s.live.Serve(c.Writer, c.Request, id, c.ClientIP()); err != nil {
		abort(c, err)
	}
}
