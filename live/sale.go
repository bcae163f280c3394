package live

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill"
)

const (
	// wsStall is how long a write may wait for room in a client's socket
	// buffer: the buffer holds hundreds of frames, so a client that has
	// not made room for that long is far behind and is dropped.
	wsStall    = 500 * time.Millisecond
	wsPongWait = 60 * time.Second
	// wsStrikes is how many rounds in a row a client may make its
	// writer wait wsStall/2 or more before it is dropped.
	wsStrikes = 3
	// wsYieldEvery is how many clients a writer writes to before it
	// yields the processor.
	wsYieldEvery = 64
	wsPingPeriod = wsPongWait * 9 / 10
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

// broadcast encodes msg once and posts it to every client as the latest
// frame of its kind: a frame not yet written is replaced, never queued
// behind, so a client's memory stays one frame of each kind and
// broadcasting never waits for a client.
func (sh *saleHub) broadcast(kind int, msg any) {
	data, _ := json.Marshal(msg)
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		slog.Error("ws hub: preparing frame", "err", err)
		return
	}
	h := sh.hub
	h.mu.Lock()
	sh.last[kind] = pm
	for cl := range sh.clients {
		cl.w.post(cl, kind, pm)
	}
	h.mu.Unlock()
	for _, w := range h.writers {
		w.wakeUp()
	}
}

// client is one connection: a reader goroutine takes pongs and notices
// the close; one of the hub's writers sends its frames and pings.
type client struct {
	conn *websocket.Conn
	ip   string
	w    *writer
	seq  int // its place in its writer's rounds
	// strikes counts the rounds in a row it made its writer wait (only
	// the writer touches it).
	strikes int
	// pending is the latest frame of each kind not yet written, queued
	// whether the client is in its writer's ready list (w.mu).
	pending [frameKinds]*websocket.PreparedMessage
	queued  bool
}

// writer is one of a hub's writer goroutines (a bounded set, however many
// watch): it writes its clients' pending frames, each once per change,
// and pings them. A write waits at most wsStall for room in the client's
// socket buffer; a client that far behind is dropped, and the writer's
// other clients waited for it once.
type writer struct {
	metrics *metrics
	wake    chan struct{} // one token: there are clients ready
	mu      sync.Mutex
	ready   []*client
	clients map[*client]bool // every client of this writer, for the pings
}

// sendOut is a ready client with the frames taken to write.
type sendOut struct {
	cl     *client
	frames [frameKinds]*websocket.PreparedMessage
}

func newWriter(m *metrics) *writer {
	return &writer{metrics: m, wake: make(chan struct{}, 1), clients: map[*client]bool{}}
}

// post makes pm the client's pending frame of its kind.
func (w *writer) post(cl *client, kind int, pm *websocket.PreparedMessage) {
	w.mu.Lock()
	cl.pending[kind] = pm
	if !cl.queued && w.clients[cl] {
		cl.queued = true
		w.ready = append(w.ready, cl)
	}
	w.mu.Unlock()
}

func (w *writer) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// add and remove count cl among the writer's clients.
func (w *writer) add(cl *client) {
	w.mu.Lock()
	w.clients[cl] = true
	w.mu.Unlock()
}

func (w *writer) remove(cl *client) {
	w.mu.Lock()
	delete(w.clients, cl)
	cl.pending = [frameKinds]*websocket.PreparedMessage{}
	queued := cl.queued
	w.mu.Unlock()
	if queued {
		w.wakeUp() // the ready list lets go of it
	}
}

// run writes until ctx ends.
func (w *writer) run(ctx context.Context) {
	ping := time.NewTicker(wsPingPeriod)
	defer ping.Stop()
	var out []sendOut
	var all []*client
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			w.mu.Lock()
			all = all[:0]
			for cl := range w.clients {
				all = append(all, cl)
			}
			w.mu.Unlock()
			for _, cl := range all {
				if err := cl.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsStall)); err != nil {
					w.drop(cl, timedOut(err))
				}
			}
			clear(all)
		case <-w.wake:
			w.mu.Lock()
			out = out[:0]
			for _, cl := range w.ready {
				out = append(out, sendOut{cl: cl, frames: cl.pending})
				cl.pending, cl.queued = [frameKinds]*websocket.PreparedMessage{}, false
			}
			clear(w.ready)
			w.ready = w.ready[:0]
			w.mu.Unlock()
			// The same order every round (the ready list follows a map's
			// order): each client's frames come a poll apart, not a poll
			// plus or minus a round.
			slices.SortFunc(out, func(a, b sendOut) int { return cmp.Compare(a.cl.seq, b.cl.seq) })
			for i, o := range out {
				w.send(o)
				if i%wsYieldEvery == wsYieldEvery-1 {
					// A long round of writes lets the rest of the
					// process (the buys) run between its slices.
					runtime.Gosched()
				}
			}
			clear(out)
		}
	}
}

// send writes a client's frames within one wsStall, dropping it if a
// write fails. A client that made the writer wait most of that
// (wsStall/2) wsStrikes rounds in a row, reading just enough not to time
// out, is dropped too: it would slow its writer's other clients every
// round.
func (w *writer) send(o sendOut) {
	start := time.Now()
	// A write only waits when the client's socket buffer is full.
	_ = o.cl.conn.SetWriteDeadline(start.Add(wsStall))
	for _, pm := range o.frames {
		if pm == nil {
			continue
		}
		if err := o.cl.conn.WritePreparedMessage(pm); err != nil {
			w.drop(o.cl, timedOut(err))
			return
		}
	}
	if time.Since(start) < wsStall/2 {
		o.cl.strikes = 0
	} else if o.cl.strikes++; o.cl.strikes >= wsStrikes {
		w.drop(o.cl, true)
	}
}

// drop closes a client whose write failed or that stalls its writer: its
// reader fails and the client leaves. A slow one (a write timed out, or
// it stalled) is counted.
func (w *writer) drop(cl *client, slow bool) {
	if slow {
		w.metrics.dropped.Inc()
	}
	w.remove(cl)
	cl.conn.Close()
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
