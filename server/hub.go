package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/seckill/seckill"
)

// Live stock over WebSocket. One hub per watched sale in this process
// polls the sale's stock hash in Redis (at most every ws_poll, only while
// someone watches) and, when remaining, status or the sale's window (a
// merchant's edit) changed, encodes one
// prepared frame that every client's writer sends. Redis is the only
// truth, so any number of server processes can serve the same sale.

const (
	wsWriteWait  = 5 * time.Second
	wsPongWait   = 60 * time.Second
	wsPingPeriod = wsPongWait * 9 / 10
	// wsQueue is how many frames a client may lag behind before it is
	// dropped as too slow; it bounds memory per connection.
	wsQueue = 4
	// wsReadLimit bounds what a client may send (it only answers pings).
	wsReadLimit = 512
)

// stockMessage is the frame of API.md's Live stock section.
type stockMessage struct {
	Type      string        `json:"type"`
	SaleID    int64         `json:"sale_id"`
	Remaining int64         `json:"remaining"`
	Total     int64         `json:"total"`
	Sold      int64         `json:"sold"`
	Status    seckill.Phase `json:"status"`
	StartsAt  time.Time     `json:"starts_at"`
	EndsAt    time.Time     `json:"ends_at"`
	At        time.Time     `json:"at"`
}

// queueMessage is the waiting room's frame (API.md, Waiting room): one
// for every watcher, each page working out its own position from its
// place.
type queueMessage struct {
	Type            string `json:"type"`
	SaleID          int64  `json:"sale_id"`
	AdmittedThrough int64  `json:"admitted_through"`
	QueueSize       int64  `json:"queue_size"`
	// JoinedBeforeStart is how many drew their places before the start;
	// AdmitPerSecond the rate set (a merchant may change it).
	JoinedBeforeStart int64         `json:"joined_before_start"`
	AdmitPerSecond    int64         `json:"admit_per_second"`
	Status            seckill.Phase `json:"status"`
	At                time.Time     `json:"at"`
}

func (m queueMessage) differs(sent queueMessage) bool {
	return sent.Type == "" || m.AdmittedThrough != sent.AdmittedThrough || m.QueueSize != sent.QueueSize ||
		m.JoinedBeforeStart != sent.JoinedBeforeStart || m.AdmitPerSecond != sent.AdmitPerSecond || m.Status != sent.Status
}

// queueGap is the least time between two queue frames of a sale (API.md:
// at most ten a second).
const queueGap = 100 * time.Millisecond

// differs reports whether m tells a watcher something new compared to sent.
func (m stockMessage) differs(sent stockMessage) bool {
	return sent.Type == "" || m.Remaining != sent.Remaining || m.Status != sent.Status ||
		!m.StartsAt.Equal(sent.StartsAt) || !m.EndsAt.Equal(sent.EndsAt)
}

// hubs holds the hubs of the sales watched in this process.
type hubs struct {
	s        *Server
	upgrader websocket.Upgrader
	// origins are the public and allowed origins; hosts the Host headers
	// the public origins stand for (empty: loopback and http_addr only).
	origins []string
	hosts   []string

	mu     sync.Mutex
	bySale map[int64]*hub
	perIP  map[string]int // open connections by client IP
	total  int
}

func newHubs(s *Server) *hubs {
	h := &hubs{s: s, bySale: map[int64]*hub{}, perIP: map[string]int{},
		origins: append(append([]string(nil), s.cfg.PublicOrigins...), s.cfg.AllowedOrigins...)}
	for _, o := range s.cfg.PublicOrigins {
		if u, err := url.Parse(o); err == nil {
			h.hosts = append(h.hosts, strings.ToLower(u.Host))
		}
	}
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout: 5 * time.Second,
		ReadBufferSize:   256,
		WriteBufferSize:  512,
		WriteBufferPool:  &sync.Pool{},
		CheckOrigin:      func(*http.Request) bool { return true }, // checked before, in serveWS
		Error:            func(w http.ResponseWriter, _ *http.Request, _ int, reason error) { handshakeRefused(w, reason) },
	}
	return h
}

// publicHost reports whether the request's Host names this site: one of
// the public origins, or, when none is configured, a loopback name or the
// host of http_addr. A page of another site that a DNS rebinding pointed
// at this server names its own host and is refused.
func (h *hubs) publicHost(r *http.Request) bool {
	host := strings.ToLower(r.Host)
	if len(h.hosts) > 0 {
		return slices.Contains(h.hosts, host)
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.Trim(name, "[]")
	if ip := net.ParseIP(name); name == "localhost" || ip != nil && ip.IsLoopback() {
		return true
	}
	own, _, _ := net.SplitHostPort(h.s.cfg.Addr)
	return own != "" && strings.EqualFold(name, own) && !net.ParseIP(own).IsUnspecified()
}

// sameOrigin refuses upgrades a browser started from another site: the
// Origin must name this host or one of the configured origins. A client
// without Origin is not a browser and may connect.
func (h *hubs) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) || slices.Contains(h.origins, origin)
}

// admit counts a new connection from ip against the caps; refused names
// the cap that refuses it instead ("total" or "per_ip").
func (h *hubs) admit(ip string) (refused string) {
	cfg := h.s.cfg
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case cfg.WSMaxTotal > 0 && h.total >= cfg.WSMaxTotal:
		return "total"
	case cfg.WSMaxPerIP > 0 && h.perIP[ip] >= cfg.WSMaxPerIP:
		return "per_ip"
	}
	h.perIP[ip]++
	h.total++
	return ""
}

// release gives back what admit counted.
func (h *hubs) release(ip string) {
	h.mu.Lock()
	h.uncount(ip)
	h.mu.Unlock()
}

func (h *hubs) uncount(ip string) {
	if h.perIP[ip]--; h.perIP[ip] <= 0 {
		delete(h.perIP, ip)
	}
	h.total--
}

// wsCapRefusals are the answers of the connection caps.
var wsCapRefusals = map[string]string{
	"total":  "This server holds as many live connections as it can; retry in a moment.",
	"per_ip": "Too many live connections from your address; close some pages and retry.",
}

// serveWS upgrades GET /ws/sales/{id} and registers the client with the
// sale's hub.
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
	switch {
	case !s.hubs.publicHost(c.Request):
		s.metrics.wsRefused.WithLabelValues("host").Inc()
		abort(c, seckill.Errorf(seckill.CodeForbidden, "WebSocket refused: this server does not serve that host."))
		return
	case !s.hubs.sameOrigin(c.Request):
		s.metrics.wsRefused.WithLabelValues("origin").Inc()
		abort(c, seckill.Errorf(seckill.CodeForbidden, "Cross-site WebSocket refused."))
		return
	}
	ip := c.ClientIP()
	if refused := s.hubs.admit(ip); refused != "" {
		s.metrics.wsRefused.WithLabelValues(refused).Inc()
		abort(c, rateLimited(wsCapRefusals[refused], 10*time.Second))
		return
	}
	conn, err := s.hubs.upgrader.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		// The upgrader has answered the client already.
		s.hubs.release(ip)
		return
	}
	s.hubs.join(id, conn, ip)
}

// join adds a connection to the sale's hub, starting the hub if it is the
// sale's first watcher here.
func (h *hubs) join(sale int64, conn *websocket.Conn, ip string) {
	cl := &wsClient{conn: conn, ip: ip, send: make(chan *websocket.PreparedMessage, wsQueue), done: make(chan struct{})}
	h.mu.Lock()
	hb, ok := h.bySale[sale]
	if !ok {
		ctx, stop := context.WithCancel(context.Background())
		hb = &hub{hubs: h, sale: sale, clients: map[*wsClient]bool{}, stop: stop}
		h.bySale[sale] = hb
		go hb.run(ctx)
	}
	hb.clients[cl] = true
	for _, pm := range hb.last {
		if pm != nil {
			cl.send <- pm // the queue is empty and longer than last: this never blocks
		}
	}
	h.mu.Unlock()
	h.s.metrics.wsClients.Inc()
	go cl.write()
	go func() {
		cl.read()
		h.leave(hb, cl)
	}()
}

// leave removes a client; the last one out stops the hub.
func (h *hubs) leave(hb *hub, cl *wsClient) {
	h.mu.Lock()
	if hb.clients[cl] {
		delete(hb.clients, cl)
		close(cl.done)
		h.s.metrics.wsClients.Dec()
		h.uncount(cl.ip)
	}
	if len(hb.clients) == 0 && h.bySale[hb.sale] == hb {
		delete(h.bySale, hb.sale)
		hb.stop()
	}
	h.mu.Unlock()
}

// closeAll disconnects every client (server shutdown).
func (h *hubs) closeAll() {
	h.mu.Lock()
	var all []*wsClient
	for _, hb := range h.bySale {
		for cl := range hb.clients {
			all = append(all, cl)
		}
	}
	h.mu.Unlock()
	for _, cl := range all {
		cl.conn.Close()
	}
}

// The kinds of frame a hub sends, by their index in hub.last.
const (
	stockFrame = iota
	queueFrame
	frameKinds
)

// hub polls one sale and fans its changes out.
type hub struct {
	hubs    *hubs
	sale    int64
	clients map[*wsClient]bool // guarded by hubs.mu
	// last is the latest frame of each kind, for a client that joins.
	last [frameKinds]*websocket.PreparedMessage
	stop context.CancelFunc
}

func (hb *hub) run(ctx context.Context) {
	tick := time.NewTicker(hb.hubs.s.cfg.WSPoll)
	defer tick.Stop()
	var sent stockMessage
	var queued queueMessage
	// The room is read every queueEvery polls: at most ten times a second.
	queueEvery := max(1, int((queueGap+hb.hubs.s.cfg.WSPoll-1)/hb.hubs.s.cfg.WSPoll))
	failing := false // log a Redis outage once, not ten times a second
	for n := 0; ; n++ {
		msg, st, err := hb.read(ctx)
		var qm queueMessage
		if err == nil && st.WaitingRoom && n%queueEvery == 0 {
			qm, err = hb.readQueue(ctx, msg.Status, st.AdmitPerSecond)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				slog.Warn("ws hub: reading stock failed; watchers keep the last value", "sale", hb.sale, "err", err)
			}
			failing = true
		case err == nil && failing:
			failing = false
			slog.Info("ws hub: reading stock again", "sale", hb.sale)
			sent, queued = stockMessage{}, queueMessage{}
		}
		if err == nil && msg.differs(sent) {
			sent = msg
			hb.broadcast(stockFrame, msg)
		}
		if err == nil && qm.Type != "" && qm.differs(queued) {
			queued = qm
			hb.broadcast(queueFrame, qm)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// read reads the sale's stock, and it as its frame.
func (hb *hub) read(ctx context.Context) (stockMessage, seckill.Stock, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := hb.hubs.s.Sales.Stock(rctx, hb.sale)
	if err != nil {
		return stockMessage{}, st, err
	}
	now := hb.hubs.s.Now()
	return stockMessage{
		Type: "stock", SaleID: hb.sale, Remaining: max(0, st.Available), Total: st.Total, Sold: st.Sold,
		Status: st.PhaseAt(now), StartsAt: st.Start.UTC(), EndsAt: st.End.UTC(), At: now.UTC(),
	}, st, nil
}

// readQueue reads the sale's waiting room as its frame (which also
// advances its admission); phase is the sale's, sold_out once the room
// says so; rate the one set.
func (hb *hub) readQueue(ctx context.Context, phase seckill.Phase, rate int64) (queueMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	q, err := hb.hubs.s.Room.Watch(rctx, hb.sale)
	switch {
	case seckill.CodeOf(err) == seckill.CodeNotFound: // the room was just turned off
		hb.hubs.mu.Lock()
		hb.last[queueFrame] = nil
		hb.hubs.mu.Unlock()
		return queueMessage{}, nil
	case err != nil:
		return queueMessage{}, err
	}
	if q.SoldOut {
		phase = seckill.PhaseSoldOut
	}
	return queueMessage{Type: "queue", SaleID: hb.sale, AdmittedThrough: q.AdmittedThrough, QueueSize: q.Size,
		JoinedBeforeStart: q.JoinedBeforeStart, AdmitPerSecond: rate, Status: phase, At: hb.hubs.s.Now().UTC()}, nil
}

// broadcast encodes msg once and queues it for every client as the latest
// frame of its kind; a client whose queue is full is too slow and is
// dropped, never waited for.
func (hb *hub) broadcast(kind int, msg any) {
	data, _ := json.Marshal(msg)
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		slog.Error("ws hub: preparing frame", "err", err)
		return
	}
	h := hb.hubs
	var slow []*wsClient
	h.mu.Lock()
	hb.last[kind] = pm
	for cl := range hb.clients {
		select {
		case cl.send <- pm:
		default:
			slow = append(slow, cl)
		}
	}
	h.mu.Unlock()
	for _, cl := range slow {
		h.s.metrics.wsDropped.Inc()
		cl.conn.Close() // its reader fails and the client leaves
	}
}

// wsClient is one connection: a writer goroutine sends queued frames and
// pings; a reader goroutine takes pongs and notices the close.
type wsClient struct {
	conn *websocket.Conn
	ip   string
	send chan *websocket.PreparedMessage
	done chan struct{}
}

func (cl *wsClient) write() {
	ping := time.NewTicker(wsPingPeriod)
	defer ping.Stop()
	defer cl.conn.Close()
	for {
		select {
		case <-cl.done:
			return
		case pm := <-cl.send:
			_ = cl.conn.SetWriteDeadline(time.Now().Add(wsWriteWait))
			if err := cl.conn.WritePreparedMessage(pm); err != nil {
				return
			}
		case <-ping.C:
			if err := cl.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteWait)); err != nil {
				return
			}
		}
	}
}

func (cl *wsClient) read() {
	cl.conn.SetReadLimit(wsReadLimit)
	_ = cl.conn.SetReadDeadline(time.Now().Add(wsPongWait))
	cl.conn.SetPongHandler(func(string) error {
		return cl.conn.SetReadDeadline(time.Now().Add(wsPongWait))
	})
	for {
		if _, _, err := cl.conn.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				slog.Debug("ws client gone", "err", err)
			}
			return
		}
	}
}
