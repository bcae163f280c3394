package live

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill/seckill/internal/wait"
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
	// The fast client's reader: the last change it read, whether frames
	// came out of order, whether it was disconnected.
	var mu sync.Mutex
	last, disorder, gone := 0, false, false
	go func() {
		for {
			_, data, err := fastCli.ReadMessage()
			var m bigMessage
			if err == nil {
				err = json.Unmarshal(data, &m)
			}
			mu.Lock()
			disorder = disorder || err == nil && m.N <= last
			last, gone = max(last, m.N), err != nil
			mu.Unlock()
			if err != nil {
				return
			}
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
		if d := time.Since(start); d >= wsStall/2 {
			t.Fatalf("broadcast %d waited %v", changes, d)
		}
		if dropped() {
			after++
		}
		time.Sleep(10 * time.Millisecond) // a hundred changes a second at most, like a busy poller
	}
	// The fast client reads up to the last change, in order.
	err := wait.Until(context.Background(), 30*time.Second, time.Millisecond, func() (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		if gone || disorder {
			return false, "", fmt.Errorf("fast client: disconnected %v, frames out of order %v, at %d", gone, disorder, last)
		}
		return last == changes, fmt.Sprintf("fast client read up to %d of %d", last, changes), nil
	})
	if err != nil {
		t.Fatal(err)
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
