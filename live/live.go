// Package live pushes a sale's live stock and waiting-room state to every
// open page over WebSocket (API.md, Live stock). One poller per watched
// sale in this process reads the sale's stock (at most every Config.Poll,
// only while someone watches) and, when something a page shows changed,
// encodes one prepared frame that the hub's writers send to every client:
// a bounded set of goroutines, each writing the latest frames to its share
// of the clients. Redis is the only truth, so any number of server
// processes can serve the same sale. The HTTP server mounts a Hub on its
// route and answers the refusals Serve returns.
package live

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
)

// Config is what a Hub needs to know.
type Config struct {
	// Poll is how often a watched sale's stock is read (ws_poll).
	Poll time.Duration
	// MaxPerIP and MaxTotal cap the open connections from one client
	// address and in all (0: no cap).
	MaxPerIP, MaxTotal int
	// Origins are the origins whose pages may connect besides the
	// request's own host (the public and allowed origins).
	Origins []string
	// Hosts are the Host headers this site is served under (the public
	// origins' hosts); empty, a loopback name or Addr's host.
	Hosts []string
	// Addr is the address served (http_addr).
	Addr string
}

// Stocks reads a sale's stock now (sales.Service).
type Stocks interface {
	Stock(ctx context.Context, sale int64) (seckill.Stock, error)
}

// Rooms reads a sale's waiting room, which also advances its admission
// (room.Service); seckill.ErrNotFound for a sale without one. A Hub
// without Rooms sends no queue frames.
type Rooms interface {
	Watch(ctx context.Context, sale int64) (seckill.Queue, error)
}

// Hub serves the live connections of this process: it admits them, keeps
// one poller per watched sale and fans its frames out.
type Hub struct {
	cfg      Config
	stocks   Stocks
	rooms    Rooms
	now      func() time.Time
	metrics  *metrics
	upgrader websocket.Upgrader

	// writers write every client's frames, a client to each in turn;
	// started by the first connection, stopped by Close.
	writers     []*writer
	startOnce   sync.Once
	stopWriters context.CancelFunc

	mu     sync.Mutex
	bySale map[int64]*saleHub
	perIP  map[string]int // open connections by client IP
	total  int
	joined int  // connections ever joined, to pick each one's writer
	closed bool // Close was called: a connection upgraded since is closed
}

// writersPerCore is how many writer goroutines a hub runs per core: a
// write may wait (wsStall), so a few per core keep the others going.
const writersPerCore = 4

// New returns a hub reading stocks and rooms on the clock now, its
// metrics (seckill_ws_*) on reg. It starts nothing until a page connects.
func New(cfg Config, stocks Stocks, rooms Rooms, now func() time.Time, reg prometheus.Registerer) *Hub {
	h := &Hub{cfg: cfg, stocks: stocks, rooms: rooms, now: now, metrics: newMetrics(reg),
		bySale: map[int64]*saleHub{}, perIP: map[string]int{}, stopWriters: func() {}}
	for range writersPerCore * runtime.GOMAXPROCS(0) {
		h.writers = append(h.writers, newWriter(h.metrics))
	}
	h.upgrader = websocket.Upgrader{
		HandshakeTimeout: 5 * time.Second,
		ReadBufferSize:   256,
		WriteBufferSize:  512,
		WriteBufferPool:  &sync.Pool{},
		CheckOrigin:      func(*http.Request) bool { return true }, // checked before, in Serve
		// A refused handshake is answered by Serve's caller, in the API's
		// error body.
		Error: func(http.ResponseWriter, *http.Request, int, error) {},
	}
	return h
}

// HostsOf returns the hosts that origins stand for, as Config.Hosts
// takes them.
func HostsOf(origins []string) []string {
	var hosts []string
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil {
			hosts = append(hosts, strings.ToLower(u.Host))
		}
	}
	return hosts
}

// Refusals of Serve before the upgrade.
var (
	errHost   = seckill.Errorf(seckill.CodeForbidden, "WebSocket refused: this server does not serve that host.")
	errOrigin = seckill.Errorf(seckill.CodeForbidden, "Cross-site WebSocket refused.")
)

// capRefusals are the answers of the connection caps, by the cap.
var capRefusals = map[string]*seckill.Error{
	reasonTotal: seckill.Errorf(seckill.CodeRateLimited, "This server holds as many live connections as it can; retry in a moment."),
	reasonPerIP: seckill.Errorf(seckill.CodeRateLimited, "Too many live connections from your address; close some pages and retry."),
}

// capRetry is when a client refused by a cap may try again.
const capRetry = 10 * time.Second

// busy is a refusal of a connection cap: rate_limited, and when to retry.
type busy struct{ err *seckill.Error }

func (b busy) Error() string { return b.err.Error() }
func (b busy) Unwrap() error { return b.err }

// RetryAfter is how long the client should wait before it connects again.
func (busy) RetryAfter() time.Duration { return capRetry }

// Serve upgrades r, a request to watch sale (known to exist), to a
// WebSocket that gets the sale's frames; ip is the client's address,
// counted against the caps. An error is a refusal not yet answered, for
// the caller to send: forbidden (a host this site is not, a page of
// another site), rate_limited (a cap; its RetryAfter says when to try
// again), invalid_request (not a WebSocket handshake). Once upgraded, or
// when the connection was lost on the way, Serve returns nil.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, sale int64, ip string) error {
	switch {
	case !h.publicHost(r):
		h.metrics.refused.WithLabelValues(reasonHost).Inc()
		return errHost
	case !h.sameOrigin(r):
		h.metrics.refused.WithLabelValues(reasonOrigin).Inc()
		return errOrigin
	}
	if refused := h.admit(ip); refused != "" {
		h.metrics.refused.WithLabelValues(refused).Inc()
		return busy{capRefusals[refused]}
	}
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		h.release(ip)
		if he := (websocket.HandshakeError{}); errors.As(err, &he) {
			return seckill.Errorf(seckill.CodeInvalid, "WebSocket handshake refused: %v.", he)
		}
		return nil // the connection was taken over and is gone: nobody to answer
	}
	h.join(sale, conn, ip)
	return nil
}

// Close disconnects every client and stops the writers (server shutdown:
// http.Server.Shutdown neither closes nor waits for hijacked connections).
func (h *Hub) Close() {
	h.startOnce.Do(func() {}) // none start after this
	h.stopWriters()
	h.mu.Lock()
	h.closed = true
	var all []*client
	for _, sh := range h.bySale {
		for cl := range sh.clients {
			all = append(all, cl)
		}
	}
	h.mu.Unlock()
	for _, cl := range all {
		cl.conn.Close()
	}
}

// publicHost reports whether the request's Host names this site: one of
// the configured hosts, or, when none is configured, a loopback name or
// the host of Addr. A page of another site that a DNS rebinding pointed
// at this server names its own host and is refused.
func (h *Hub) publicHost(r *http.Request) bool {
	host := strings.ToLower(r.Host)
	if len(h.cfg.Hosts) > 0 {
		return slices.Contains(h.cfg.Hosts, host)
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	name = strings.Trim(name, "[]")
	if ip := net.ParseIP(name); name == "localhost" || ip != nil && ip.IsLoopback() {
		return true
	}
	own, _, _ := net.SplitHostPort(h.cfg.Addr)
	return own != "" && strings.EqualFold(name, own) && !net.ParseIP(own).IsUnspecified()
}

// sameOrigin refuses upgrades a browser started from another site: the
// Origin must name this host or one of the configured origins. A client
// without Origin is not a browser and may connect.
func (h *Hub) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) || slices.Contains(h.cfg.Origins, origin)
}

// admit counts a new connection from ip against the caps; refused names
// the cap that refuses it instead (reasonTotal or reasonPerIP).
func (h *Hub) admit(ip string) (refused string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.cfg.MaxTotal > 0 && h.total >= h.cfg.MaxTotal:
		return reasonTotal
	case h.cfg.MaxPerIP > 0 && h.perIP[ip] >= h.cfg.MaxPerIP:
		return reasonPerIP
	}
	h.perIP[ip]++
	h.total++
	return ""
}

// release gives back what admit counted.
func (h *Hub) release(ip string) {
	h.mu.Lock()
	h.uncount(ip)
	h.mu.Unlock()
}

func (h *Hub) uncount(ip string) {
	if h.perIP[ip]--; h.perIP[ip] <= 0 {
		delete(h.perIP, ip)
	}
	h.total--
}

// join adds a connection to the sale's poller, starting it if this is the
// sale's first watcher here.
func (h *Hub) join(sale int64, conn *websocket.Conn, ip string) {
	h.startOnce.Do(func() {
		ctx, stop := context.WithCancel(context.Background())
		h.stopWriters = stop
		for _, w := range h.writers {
			go w.run(ctx)
		}
	})
	h.mu.Lock()
	if h.closed {
		h.uncount(ip)
		h.mu.Unlock()
		conn.Close()
		return
	}
	cl := &client{conn: conn, ip: ip, w: h.writers[h.joined%len(h.writers)], seq: h.joined}
	h.joined++
	cl.w.add(cl)
	sh, ok := h.bySale[sale]
	if !ok {
		ctx, stop := context.WithCancel(context.Background())
		sh = &saleHub{hub: h, sale: sale, clients: map[*client]bool{}, stop: stop}
		h.bySale[sale] = sh
		go sh.run(ctx)
	}
	sh.clients[cl] = true
	for kind, pm := range sh.last {
		if pm != nil {
			cl.w.post(cl, kind, pm)
		}
	}
	h.mu.Unlock()
	cl.w.wakeUp()
	h.metrics.clients.Inc()
	go func() {
		cl.read()
		h.leave(sh, cl)
	}()
}

// leave removes a client; the last one out stops the sale's poller.
func (h *Hub) leave(sh *saleHub, cl *client) {
	h.mu.Lock()
	cl.w.remove(cl)
	if sh.clients[cl] {
		delete(sh.clients, cl)
		h.metrics.clients.Dec()
		h.uncount(cl.ip)
	}
	if len(sh.clients) == 0 && h.bySale[sh.sale] == sh {
		delete(h.bySale, sh.sale)
		sh.stop()
	}
	h.mu.Unlock()
	cl.conn.Close() // its reader ended: the connection is over
}
