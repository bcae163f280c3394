package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sales"
	"github.com/seckill/seckill/server"
)

// fakeSales is a sales service that knows one sale, as wtf's mock
// package stands in for a service: a method the test does not give is
// the embedded nil interface's, and panics (a 500) if a route calls it.
type fakeSales struct {
	server.Sales
	view sales.View
}

func (f fakeSales) Find(_ context.Context, id int64) (sales.View, error) {
	if id != f.view.Sale.ID {
		return sales.View{}, seckill.ErrSaleNotFound
	}
	return f.view, nil
}

// fakeNow is the clock of the fake servers.
var fakeNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeSale is the one sale fakeSales knows: on, 312 of 1000 units left.
var fakeSale = sales.View{
	Sale: seckill.Sale{ID: 7, Name: "Midnight drop", Item: "Keyboard K2", PriceCents: 4999, Total: 1000, PerUserLimit: 2,
		StartsAt: fakeNow.Add(-time.Hour), EndsAt: fakeNow.Add(time.Hour), Buckets: 1},
	Stock: seckill.Stock{Total: 1000, Available: 312, Sold: 688, Limit: 2,
		Start: fakeNow.Add(-time.Hour), End: fakeNow.Add(time.Hour), Status: seckill.StatusActive},
}

// newFakeServer builds a server on fakes alone: no Redis, no SQL.
func newFakeServer(t *testing.T, d server.Deps) *server.Server {
	t.Helper()
	if d.Now == nil {
		d.Now = func() time.Time { return fakeNow }
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	srv, err := server.New(server.Config{Addr: "127.0.0.1:0", BodyLimit: 4 << 10, WSPoll: 100 * time.Millisecond}, d)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestSaleFromFakeService: a route answers from whatever service the
// server is given: the sale of a fake, shown as API.md says, and its
// refusal for an unknown sale.
func TestSaleFromFakeService(t *testing.T) {
	h := newFakeServer(t, server.Deps{Sales: fakeSales{view: fakeSale}}).Handler()

	r := call(t, h, "GET", "/api/sales/7", nil)
	if r.Status != 200 || r.Body["name"] != "Midnight drop" || num(r.Body, "remaining") != 312 || num(r.Body, "total") != 1000 ||
		r.Body["status"] != "active" || r.Body["starts_at"] != "2030-01-02T02:04:05Z" || r.Body["merchant_id"] != nil {
		t.Errorf("the fake's sale: %v", r)
	}
	if r := call(t, h, "GET", "/api/sales/8", nil); r.Status != 404 || r.code() != "sale_not_found" {
		t.Errorf("an unknown sale: %v", r)
	}
}

// TestMethodNotAllowed: a known path asked with a method it does not
// take is answered 405 with Allow and the JSON error body; HEAD and
// OPTIONS, which Gin routes only where registered, get the same on a GET
// route. An unknown path is still the JSON 404, a trailing slash too.
func TestMethodNotAllowed(t *testing.T) {
	h := newFakeServer(t, server.Deps{Sales: fakeSales{view: fakeSale}}).Handler()
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/api/sales/1/buy", "POST"},
		{"PUT", "/api/sales", "GET"},
		{"DELETE", "/admin/api/sales/1", "GET, PATCH"},
		{"POST", "/healthz", "GET"},
		{"POST", "/ws/sales/1", "GET"},
		{"HEAD", "/api/sales", "GET"},
		{"OPTIONS", "/api/sales/1/buy", "POST"},
	} {
		r := call(t, h, tc.method, tc.path, nil)
		if r.Status != 405 || r.Header.Get("Allow") != tc.allow || r.code() != "method_not_allowed" ||
			r.Body["error"].(map[string]any)["message"] != seckill.CodeMethodNotAllowed.Message() {
			t.Errorf("%s %s: %v, Allow %q; want 405 method_not_allowed, Allow %q", tc.method, tc.path, r, r.Header.Get("Allow"), tc.allow)
		}
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/no-such-route"}, {"POST", "/api/no-such-route"}, {"DELETE", "/nothing/here"}, {"GET", "/api/sales/"},
	} {
		if r := call(t, h, tc.method, tc.path, nil); r.Status != 404 || r.code() != "not_found" || r.Header.Get("Allow") != "" {
			t.Errorf("%s %s: %v, want the JSON 404", tc.method, tc.path, r)
		}
	}
}
