package live_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/system/servertest"
)

// TestMain stops the topologies the tests shared (a Redis Cluster under
// SECKILL_TEST_REDIS=cluster).
func TestMain(m *testing.M) { os.Exit(servertest.Main(m)) }

type stockFrame struct {
	Type      string    `json:"type"`
	SaleID    int64     `json:"sale_id"`
	Remaining int64     `json:"remaining"`
	Status    string    `json:"status"`
	StartsAt  time.Time `json:"starts_at"`
	EndsAt    time.Time `json:"ends_at"`
	At        time.Time `json:"at"`
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

// buy buys one unit of sale as the holder of tok through the server at
// base, failing the test unless it is accepted.
func buy(t *testing.T, base string, sale int64, tok, rid string) {
	t.Helper()
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/sales/%d/buy", base, sale), strings.NewReader(fmt.Sprintf(`{"qty":1,"request_id":%q}`, rid)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("buy %s: %s", rid, res.Status)
	}
}

// TestLiveStock: watchers get the stock on connect and every change after
// a buy, from two server processes sharing Redis (no process-local truth);
// frames are coalesced (never more than ~10 per second per sale).
func TestLiveStock(t *testing.T) {
	env := servertest.New(t)
	srv, other := env.Server(t, nil), env.Server(t, nil) // two server processes on the same Redis
	a, b := servertest.HTTP(t, srv.Handler()), servertest.HTTP(t, other.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 50, Limit: 50})

	var conns []*websocket.Conn
	for _, base := range []string{a.URL, a.URL, b.URL} {
		c, _, err := servertest.DialWS(t, base, sale.ID, nil)
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
		buy(t, a.URL, sale.ID, tok, fmt.Sprintf("ws-req-%04d", i))
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

// TestLiveStockRefusals: through the server, a cross-origin upgrade is
// refused 403 and an unknown sale 404; a same-origin one connects.
func TestLiveStockRefusals(t *testing.T) {
	srv := servertest.New(t).Server(t, nil)
	ts := servertest.HTTP(t, srv.Handler())
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{})

	_, res, err := servertest.DialWS(t, ts.URL, sale.ID, http.Header{"Origin": {"https://evil.example"}})
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin upgrade: %v, %v", res, err)
	}
	_, res, err = servertest.DialWS(t, ts.URL, 999999999, nil)
	if err == nil || res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown sale: %v, %v", res, err)
	}
	// Same origin is fine.
	if _, _, err := servertest.DialWS(t, ts.URL, sale.ID, http.Header{"Origin": {ts.URL}}); err != nil {
		t.Fatalf("same-origin upgrade: %v", err)
	}
}
