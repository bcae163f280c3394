package live

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// wsPair returns the server side and the client side of a real WebSocket.
func wsPair(t *testing.T) (server, client *websocket.Conn) {
	t.Helper()
	conns := make(chan *websocket.Conn, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		conns <- c
	}))
	t.Cleanup(ts.Close)
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return <-conns, client
}

// bigMessage is a frame large enough to fill a socket's buffers in a few.
type bigMessage struct {
	Type    string `json:"type"`
	N       int    `json:"n"`
	Padding string `json:"padding"`
}

// TestSlowClientDropped: one writer serves a client that reads and one
// that never does. Broadcasting never waits; the stalled client is
// dropped once a write has waited wsStall for room in its socket; the
// reading client gets the latest frame after every change, and the frames
// it missed while the writer waited are replaced by newer ones, not
// queued.
func TestSlowClientDropped(t *testing.T) {
	h := New(Config{Poll: time.Second}, nil, nil, time.Now, prometheus.NewRegistry())
	w := newWriter(h.metrics)
	h.writers = []*writer{w}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go w.run(ctx)
	sh := &saleHub{hub: h, sale: 1, clients: map[*client]bool{}}

	fastSrv, fastCli := wsPair(t)
	slowSrv, slowCli := wsPair(t)
	fast := &client{conn: fastSrv, ip: "192.0.2.1", w: w}
	slow := &client{conn: slowSrv, ip: "192.0.2.2", w: w}
	for _, cl := range []*client{fast, slow} {
		w.add(cl)
		sh.clients[cl] = true
	}
	got := make(chan int, 1000)
	go func() {
		for {
			_, data, err := fastCli.ReadMessage()
			if err != nil {
				close(got)
				return
			}
			var m bigMessage
			if err := json.Unmarshal(data, &m); err != nil {
				t.Error(err)
			}
			got <- m.N
		}
	}()

	// Change until the writer drops the stalled client (each frame is
	// 1 MiB: its socket buffers fill after a few), and a few times more.
	pad := strings.Repeat("x", 1<<20)
	dropped := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.clients[slow]
	}
	changes, after := 0, 0
	for stop := time.Now().Add(30 * time.Second); after < 5; {
		if time.Now().After(stop) {
			t.Fatalf("the stalled client was not dropped after %d changes", changes)
		}
		changes++
		start := time.Now()
		sh.broadcast(stockFrame, bigMessage{Type: "stock", N: changes, Padding: pad})
		if d := time.Since(start); d > time.Second {
			t.Fatalf("broadcast %d waited %v", changes, d)
		}
		if dropped() {
			after++
		}
	}
	// The fast client reads up to the last change.
	deadline := time.After(30 * time.Second)
	last := 0
	for last < changes {
		select {
		case n, ok := <-got:
			if !ok {
				t.Fatalf("fast client disconnected after frame %d", last)
			}
			if n <= last {
				t.Fatalf("frame %d after %d: frames out of order", n, last)
			}
			last = n
		case <-deadline:
			t.Fatalf("fast client read up to %d of %d", last, changes)
		}
	}
	// The slow one was dropped: its connection ends once it reads.
	_ = slowCli.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		if _, _, err := slowCli.ReadMessage(); err != nil {
			if strings.Contains(err.Error(), "timeout") {
				t.Fatalf("slow client still connected: %v", err)
			}
			break
		}
	}
	var m dto.Metric
	_ = h.metrics.dropped.Write(&m)
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("dropped counter %v, want 1", got)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.clients[slow] || !w.clients[fast] {
		t.Errorf("writer's clients: slow %v fast %v, want only the fast one", w.clients[slow], w.clients[fast])
	}
}
