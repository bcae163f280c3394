package live

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill"
)

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

// The kinds of frame a sale's poller sends, by their index in saleHub.last.
const (
	stockFrame = iota
	queueFrame
	frameKinds
)

// saleHub polls one sale and fans its changes out.
type saleHub struct {
	hub     *Hub
	sale    int64
	clients map[*client]bool // guarded by hub.mu
	// last is the latest frame of each kind, for a client that joins.
	last [frameKinds]*websocket.PreparedMessage
	stop context.CancelFunc
}

func (sh *saleHub) run(ctx context.Context) {
	tick := time.NewTicker(sh.hub.cfg.Poll)
	defer tick.Stop()
	var sent stockMessage
	var queued queueMessage
	// The room is read every queueEvery polls: at most ten times a second.
	queueEvery := max(1, int((queueGap+sh.hub.cfg.Poll-1)/sh.hub.cfg.Poll))
	failing := false // log a Redis outage once, not ten times a second
	for n := 0; ; n++ {
		msg, st, err := sh.read(ctx)
		var qm queueMessage
		if err == nil && st.WaitingRoom && sh.hub.rooms != nil && n%queueEvery == 0 {
			qm, err = sh.readQueue(ctx, msg.Status, st.AdmitPerSecond)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				slog.Warn("ws hub: reading stock failed; watchers keep the last value", "sale", sh.sale, "err", err)
			}
			failing = true
		case err == nil && failing:
			failing = false
			slog.Info("ws hub: reading stock again", "sale", sh.sale)
			sent, queued = stockMessage{}, queueMessage{}
		}
		if err == nil && msg.differs(sent) {
			sent = msg
			sh.broadcast(stockFrame, msg)
		}
		if err == nil && qm.Type != "" && qm.differs(queued) {
			queued = qm
			sh.broadcast(queueFrame, qm)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// read reads the sale's stock, and it as its frame.
func (sh *saleHub) read(ctx context.Context) (stockMessage, seckill.Stock, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := sh.hub.stocks.Stock(rctx, sh.sale)
	if err != nil {
		return stockMessage{}, st, err
	}
	now := sh.hub.now()
	return stockMessage{
		Type: "stock", SaleID: sh.sale, Remaining: max(0, st.Available), Total: st.Total, Sold: st.Sold,
		Status: st.PhaseAt(now), StartsAt: st.Start.UTC(), EndsAt: st.End.UTC(), At: now.UTC(),
	}, st, nil
}

// readQueue reads the sale's waiting room as its frame (which also
// advances its admission); phase is the sale's, sold_out once the room
// says so; rate the one set.
func (sh *saleHub) readQueue(ctx context.Context, phase seckill.Phase, rate int64) (queueMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	q, err := sh.hub.rooms.Watch(rctx, sh.sale)
	switch {
	case seckill.CodeOf(err) == seckill.CodeNotFound: // the room was just turned off
		sh.hub.mu.Lock()
		sh.last[queueFrame] = nil
		sh.hub.mu.Unlock()
		return queueMessage{}, nil
	case err != nil:
		return queueMessage{}, err
	}
	if q.SoldOut {
		phase = seckill.PhaseSoldOut
	}
	return queueMessage{Type: "queue", SaleID: sh.sale, AdmittedThrough: q.AdmittedThrough, QueueSize: q.Size,
		JoinedBeforeStart: q.JoinedBeforeStart, AdmitPerSecond: rate, Status: phase, At: sh.hub.now().UTC()}, nil
}

// broadcast encodes msg once and queues it for every client as the latest
// frame of its kind; a client whose queue is full is too slow and is
// dropped, never waited for.
func (sh *saleHub) broadcast(kind int, msg any) {
	data, _ := json.Marshal(msg)
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		slog.Error("ws hub: preparing frame", "err", err)
		return
	}
	h := sh.hub
	var slow []*client
	h.mu.Lock()
	sh.last[kind] = pm
	for cl := range sh.clients {
		select {
		case cl.send <- pm:
		default:
			slow = append(slow, cl)
		}
	}
	h.mu.Unlock()
	for _, cl := range slow {
		h.metrics.dropped.Inc()
		cl.conn.Close() // its reader fails and the client leaves
	}
}

// client is one connection: a writer goroutine sends queued frames and
// pings; a reader goroutine takes pongs and notices the close.
type client struct {
	conn *websocket.Conn
	ip   string
	send chan *websocket.PreparedMessage
	done chan struct{}
}

func newClient(conn *websocket.Conn, ip string) *client {
	return &client{conn: conn, ip: ip, send: make(chan *websocket.PreparedMessage, wsQueue), done: make(chan struct{})}
}

func (cl *client) write() {
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

func (cl *client) read() {
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
