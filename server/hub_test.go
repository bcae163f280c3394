package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/system/servertest"
)

type stockFrame struct {
	Type      string    `json:"type"`
	SaleID    int64     `json:"sale_id"`
	Remaining int64     `json:"remaining"`
	Status    string    `json:"status"`
	StartsAt  time.Time `json:"starts_at"`
	EndsAt    time.Time `json:"ends_at"`
	At        time.Time `json:"at"`
}

func dialWS(t *testing.T, base string, sale int64, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	url := fmt.Sprintf("ws%s/ws/sales/%d", strings.TrimPrefix(base, "http"), sale)
	c, res, err := websocket.DefaultDialer.Dial(url, header)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, res, err
}

// next reads frames until one satisfies ok, failing after a deadline.
func next(t *testing.T, c *websocket.Conn, what string, ok func(stockFrame) bool) stockFrame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		var f stockFrame
		if err := json.Unmarshal(data, &f); err != nil || f.Type != "stock" && f.Type != "queue" {
			t.Fatalf("bad frame %s: %v", data, err)
		}
		if f.Type == "stock" && ok(f) {
			return f
		}
	}
}

// TestLiveStock: watchers get the stock on connect and every change after
// a buy, from two server processes sharing Redis (no process-local truth);
// frames are coalesced (never more than ~10 per second per sale).
func TestLiveStock(t *testing.T) {
	st := newStack(t)
	other := st.Server(t, nil) // a second server process on the same Redis
	a, b := servertest.HTTP(t, st.h), servertest.HTTP(t, other.Handler())
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{Total: 50, Limit: 50})

	var conns []*websocket.Conn
	for _, base := range []string{a.URL, a.URL, b.URL} {
		c, _, err := dialWS(t, base, sale.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := next(t, c, "the first frame", func(stockFrame) bool { return true })
		if f.SaleID != sale.ID || f.Remaining != 50 || f.Status != "active" || f.At.IsZero() ||
			!f.StartsAt.Equal(sale.StartsAt) || !f.EndsAt.Equal(sale.EndsAt) {
			t.Fatalf("first frame %+v", f)
		}
		conns = append(conns, c)
	}

	tok := servertest.Token(t, "ws-buyer")
	start := time.Now()
	for i := range 50 {
		res := call(t, st.h, "POST", buyPath(sale.ID), buyBody(1, fmt.Sprintf("ws-req-%04d", i)), bearer(tok))
		if res.Status != 200 {
			t.Fatalf("buy %d: %s", i, res)
		}
	}
	var wg sync.WaitGroup
	frames := make([]int, len(conns))
	for i, c := range conns {
		wg.Go(func() {
			next(t, c, "sold out", func(f stockFrame) bool {
				frames[i]++
				return f.Remaining == 0 && f.Status == "sold_out"
			})
		})
	}
	wg.Wait()
	// 50 changes inside this window: with coalescing a watcher sees at most
	// one frame per poll tick.
	limit := int(time.Since(start)/(100*time.Millisecond)) + 2
	for i, n := range frames {
		if n > limit {
			t.Errorf("watcher %d got %d frames in %s; coalescing allows %d", i, n, time.Since(start), limit)
		}
	}
}

func TestLiveStockRefusals(t *testing.T) {
	st := newStack(t)
	ts := servertest.HTTP(t, st.h)
	sale := servertest.MustSale(t, st.srv, servertest.SaleSpec{})

	_, res, err := dialWS(t, ts.URL, sale.ID, http.Header{"Origin": {"https://evil.example"}})
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin upgrade: %v, %v", res, err)
	}
	_, res, err = dialWS(t, ts.URL, 999999999, nil)
	if err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown sale: %v, %v", res, err)
	}
	// Same origin is fine.
	if _, _, err := dialWS(t, ts.URL, sale.ID, http.Header{"Origin": {ts.URL}}); err != nil {
		t.Fatalf("same-origin upgrade: %v", err)
	}
}
