package live

import (
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

// TestBroadcastDropsSlowClient: a client whose queue is full is dropped
// at once; the others get the frame; nobody waits for the slow one.
func TestBroadcastDropsSlowClient(t *testing.T) {
	h := New(Config{Poll: time.Second}, nil, nil, time.Now, prometheus.NewRegistry())
	sh := &saleHub{hub: h, sale: 1, clients: map[*client]bool{}}

	fastSrv, fastCli := wsPair(t)
	fast := newClient(fastSrv, "192.0.2.1")
	go fast.write()
	slowSrv, slowCli := wsPair(t)
	slow := newClient(slowSrv, "192.0.2.2")
	for range wsQueue {
		slow.send <- nil // a writer that never catches up
	}
	sh.clients[fast], sh.clients[slow] = true, true

	done := make(chan struct{})
	go func() {
		sh.broadcast(stockFrame, stockMessage{Type: "stock", SaleID: 1, Remaining: 41, Status: "active"})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("broadcast is blocked on the slow client")
	}
	_ = fastCli.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, data, err := fastCli.ReadMessage()
	if err != nil || !strings.Contains(string(data), `"remaining":41`) {
		t.Fatalf("fast client got %s, %v", data, err)
	}
	_ = slowCli.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := slowCli.ReadMessage(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("slow client still connected: %v", err)
	}
	var m dto.Metric
	_ = h.metrics.dropped.Write(&m)
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("dropped counter %v, want 1", got)
	}
	close(fast.done)
}
