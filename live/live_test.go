package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/live"
)

// fakeStocks is a sale's stock held in memory, changed by the test.
type fakeStocks struct {
	mu sync.Mutex
	st seckill.Stock
}

func (f *fakeStocks) Stock(context.Context, int64) (seckill.Stock, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st, nil
}

func (f *fakeStocks) set(available int64) {
	f.mu.Lock()
	f.st.Available, f.st.Sold = available, f.st.Total-available
	f.mu.Unlock()
}

// hubStack is a hub on a fake stock, served by a plain HTTP server that
// answers its refusals as the API does (status of the code, Retry-After)
// and takes the client's address from X-Client.
type hubStack struct {
	hub    *live.Hub
	stocks *fakeStocks
	reg    *prometheus.Registry
	ts     *httptest.Server
}

const testSale = 7

func newHubStack(t *testing.T, cfg live.Config) *hubStack {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	now := time.Now()
	hs := &hubStack{
		stocks: &fakeStocks{st: seckill.Stock{Total: 10, Available: 10, Limit: 1, Start: now.Add(-time.Minute), End: now.Add(time.Hour),
			Status: seckill.StatusActive}},
		reg: prometheus.NewRegistry(),
	}
	hs.hub = live.New(cfg, hs.stocks, nil, time.Now, hs.reg)
	hs.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := hs.hub.Serve(w, r, testSale, r.Header.Get("X-Client"))
		if err == nil {
			return
		}
		var wait interface{ RetryAfter() time.Duration }
		if errors.As(err, &wait) {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.RetryAfter().Seconds())))
		}
		code := seckill.CodeOf(err)
		w.WriteHeader(code.HTTPStatus())
		fmt.Fprint(w, code)
	}))
	t.Cleanup(func() { hs.hub.Close(); hs.ts.Close() })
	return hs
}

// dial connects as the client at ip with header; the test fails unless
// the answer is want (101 for a connection).
func (hs *hubStack) dial(t *testing.T, ip string, header http.Header, want int) *websocket.Conn {
	t.Helper()
	if header == nil {
		header = http.Header{}
	}
	header.Set("X-Client", ip)
	c, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.ts.URL, "http"), header)
	got := 0
	if res != nil {
		got = res.StatusCode
	}
	if got != want {
		t.Fatalf("dial from %s: %d (%v), want %d", ip, got, err, want)
	}
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	return c
}

// refused is the hub's seckill_ws_refused_total by reason.
func (hs *hubStack) refused(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := hs.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_ws_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

type frame struct {
	Type      string `json:"type"`
	SaleID    int64  `json:"sale_id"`
	Remaining int64  `json:"remaining"`
	Status    string `json:"status"`
}

func readFrame(t *testing.T, c *websocket.Conn) frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, data, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("frame %s: %v", data, err)
	}
	return f
}

// TestFrames: a page gets the stock when it connects and a frame for each
// change, only for a change; Close disconnects it.
func TestFrames(t *testing.T) {
	hs := newHubStack(t, live.Config{})
	c := hs.dial(t, "192.0.2.1", nil, http.StatusSwitchingProtocols)
	if f := readFrame(t, c); f != (frame{Type: "stock", SaleID: testSale, Remaining: 10, Status: "active"}) {
		t.Fatalf("first frame %+v", f)
	}
	hs.stocks.set(4)
	if f := readFrame(t, c); f.Remaining != 4 || f.Status != "active" {
		t.Fatalf("after a change: %+v", f)
	}
	hs.stocks.set(0)
	if f := readFrame(t, c); f.Remaining != 0 || f.Status != "sold_out" {
		t.Fatalf("sold out: %+v", f)
	}
	// A second page gets the last frame at once.
	if f := readFrame(t, hs.dial(t, "192.0.2.2", nil, http.StatusSwitchingProtocols)); f.Remaining != 0 {
		t.Fatalf("a late page's first frame: %+v", f)
	}
	hs.hub.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, data, err := c.ReadMessage(); err == nil {
		t.Fatalf("a frame after Close: %s", data)
	}
}

// closedByServer reports whether c's connection ends (EOF or reset)
// within 5 s: the server closed it.
func closedByServer(c *websocket.Conn) error {
	nc := c.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := nc.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return fmt.Errorf("the server kept the connection open: %w", err)
			}
			return nil
		}
	}
}

// TestLeaveClosesTheConnection: a page that says goodbye gets its
// connection closed by the server, and so does one that connects while
// the hub is closing, without a frame.
func TestLeaveClosesTheConnection(t *testing.T) {
	hs := newHubStack(t, live.Config{})
	c := hs.dial(t, "192.0.2.1", nil, http.StatusSwitchingProtocols)
	readFrame(t, c)
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")); err != nil {
		t.Fatal(err)
	}
	if err := closedByServer(c); err != nil {
		t.Fatal(err)
	}
	hs.hub.Close()
	late := hs.dial(t, "192.0.2.2", nil, http.StatusSwitchingProtocols)
	if err := closedByServer(late); err != nil {
		t.Fatalf("a page after Close: %v", err)
	}
}

// TestRefusals: a foreign host or origin is forbidden, a connection over
// a cap is rate-limited with Retry-After, each counted by its reason; a
// request that is no handshake is invalid.
func TestRefusals(t *testing.T) {
	hs := newHubStack(t, live.Config{MaxPerIP: 1, MaxTotal: 2})
	req, _ := http.NewRequest("GET", hs.ts.URL, nil)
	req.Header.Set("X-Client", "192.0.2.5")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a plain GET: %s", res.Status)
	}
	// Its place is given back: two connections fit.
	hs.dial(t, "192.0.2.1", http.Header{"Origin": {hs.ts.URL}}, http.StatusSwitchingProtocols)
	hs.dial(t, "192.0.2.1", nil, http.StatusTooManyRequests)
	hs.dial(t, "192.0.2.2", nil, http.StatusSwitchingProtocols)
	hs.dial(t, "192.0.2.3", nil, http.StatusTooManyRequests)
	hs.dial(t, "192.0.2.4", http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden)
	hs.dial(t, "192.0.2.4", http.Header{"Host": {"evil.example"}}, http.StatusForbidden)
	want := map[string]float64{"host": 1, "origin": 1, "per_ip": 1, "total": 1}
	if got := hs.refused(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refused %v, want %v", got, want)
	}

	// A cap's refusal says when to try again.
	_, res, _ = websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.ts.URL, "http"), http.Header{"X-Client": {"192.0.2.9"}})
	if res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "10" {
		t.Errorf("over the total cap: %v", res)
	}
}

// TestRefusedFromTheStart: every reason of seckill_ws_refused_total is
// exported at 0 before the first refusal, so a panel of refusals reads 0
// on a healthy system rather than "No data".
func TestRefusedFromTheStart(t *testing.T) {
	hs := newHubStack(t, live.Config{})
	want := map[string]float64{"host": 0, "origin": 0, "per_ip": 0, "total": 0}
	if got := hs.refused(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refused %v, want %v", got, want)
	}
}
