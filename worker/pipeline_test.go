package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/memory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

// pipeline is a server, a relay and a worker on a test's own slice of the
// services.
type pipeline struct {
	*servertest.Env
	srv     *server.Server
	broker  bus.Bus
	metrics system.Metrics
	reg     *prometheus.Registry // the metrics'
}

// newPipeline builds a pipeline on RabbitMQ.
func newPipeline(t *testing.T, overrides ...string) *pipeline {
	t.Helper()
	p := barePipeline(t, overrides...)
	p.broker = servertest.Broker(t, p.Config)
	return p
}

// barePipeline builds a pipeline without its bus.
func barePipeline(t *testing.T, overrides ...string) *pipeline {
	t.Helper()
	env := servertest.New(t, append([]string{"SECKILL_RELAY_CLAIM_IDLE=500ms"}, overrides...)...)
	reg := prometheus.NewRegistry()
	return &pipeline{Env: env, srv: env.Server(t, nil), metrics: system.NewMetrics(reg), reg: reg}
}

// counter is the value of one of the relay's and worker's unlabelled
// counters.
func (p *pipeline) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// eachBus runs a pipeline test on both implementations of the bus:
// RabbitMQ and the in-process one of the embedded mode.
func eachBus(t *testing.T, overrides []string, fn func(t *testing.T, p *pipeline)) {
	t.Run("rabbitmq", func(t *testing.T) { fn(t, newPipeline(t, overrides...)) })
	t.Run("memory", func(t *testing.T) {
		p := barePipeline(t, overrides...)
		b := memory.New()
		t.Cleanup(func() { b.Close() })
		p.broker = b
		fn(t, p)
	})
}

// run starts fn until the returned stop is called (or the test ends).
func run(t *testing.T, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("stopped: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (p *pipeline) relay(b bus.Bus) *worker.Relay {
	rc := system.RelayConfig(p.Config)
	rc.Poll = 100 * time.Millisecond
	return worker.NewRelay(p.Inventory, p.Ledger, b, p.metrics.Relay, rc)
}

// consumers runs the order and the timeout consumer on b, writing to
// ledger, until the test ends.
func (p *pipeline) consumers(t *testing.T, b bus.Bus, ledger *orders.Store) {
	m := p.metrics
	run(t, worker.NewOrderConsumer(b, ledger, p.Funds, m.Orders, m.Consumers, system.OrderConsumerConfig(p.Config)).Run)
	run(t, worker.NewTimeoutConsumer(b, ledger, p.Inventory, p.Funds, m.Timeouts, m.Consumers, system.TimeoutConsumerConfig(p.Config)).Run)
}

// startAll runs the relays and the consumers, the orders' and the
// funds', on the pipeline's own broker.
func (p *pipeline) startAll(t *testing.T) {
	run(t, p.relay(p.broker).Run)
	p.consumers(t, p.broker, p.Ledger)
	run(t, p.fundsRelay(p.Funds, p.broker).Run)
	p.fundsConsumer(t, p.broker, p.Ledger, p.Funds)
}

// bought is an accepted buy as its 200 answer told it.
type bought struct {
	OrderID string
	User    string
	Qty     int64
}

// buy sends n buys from n users (qty 1 or 2, within the limit) through the HTTP handler,
// concurrency at a time, and returns the accepted ones.
func (p *pipeline) buy(t *testing.T, sale seckill.Sale, n, concurrency int, tag string) []bought {
	t.Helper()
	h := p.srv.Handler()
	var (
		mu  sync.Mutex
		out []bought
		wg  sync.WaitGroup
		sem = make(chan struct{}, concurrency)
	)
	for i := range n {
		user := fmt.Sprintf("%s-user-%d", tag, i)
		qty := min(int64(1+i%2), sale.PerUserLimit)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			status, body := buyOnce(t, h, sale.ID, user, qty, fmt.Sprintf("%s-req-%06d", tag, i))
			if status == http.StatusOK {
				mu.Lock()
				out = append(out, bought{OrderID: body, User: user, Qty: qty})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// buyOnce sends one buy; for a 200 it returns the order id.
func buyOnce(t testing.TB, h http.Handler, sale int64, user string, qty int64, rid string) (int, string) {
	body := fmt.Sprintf(`{"qty":%d,"request_id":%q}`, qty, rid)
	req := httptest.NewRequest("POST", fmt.Sprintf("/api/sales/%d/buy", sale), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+servertest.Token(t, user))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec.Code, rec.Body.String()
	}
	var id string
	if _, err := fmt.Sscanf(rec.Body.String(), `{"order_id":%q`, &id); err != nil {
		t.Fatalf("buy answer %q: %v", rec.Body.String(), err)
	}
	return rec.Code, id
}

// waitPersisted waits until MySQL holds n orders for the sale.
func (p *pipeline) waitPersisted(t *testing.T, sale int64, n int, d time.Duration) {
	t.Helper()
	servertest.WaitFor(t, d, fmt.Sprintf("%d orders of sale %d in MySQL", n, sale), func() (bool, string) {
		var got int
		if err := p.DB.Get(&got, "SELECT COUNT(*) FROM orders WHERE sale_id = ?", sale); err != nil {
			return false, err.Error()
		}
		return got >= n, fmt.Sprintf("%d orders", got)
	})
}

// checkLedger asserts that MySQL holds exactly the accepted orders, each
// once, with quantities and amounts matching, and that the ledger's sums
// count each order as its sale movement.
func (p *pipeline) checkLedger(t *testing.T, sale seckill.Sale, accepted []bought) {
	t.Helper()
	os, err := p.Ledger.SaleOrders(context.Background(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bought{}
	for _, b := range accepted {
		want[b.OrderID] = b
	}
	if len(os) != len(want) {
		t.Errorf("MySQL holds %d orders, %d were accepted", len(os), len(want))
	}
	for _, o := range os {
		b, ok := want[o.ID]
		if !ok {
			t.Errorf("order %s in MySQL was never accepted", o.ID)
			continue
		}
		if o.UserID != b.User || o.Qty != b.Qty || o.AmountCents != b.Qty*sale.PriceCents || o.UnitPriceCents != sale.PriceCents {
			t.Errorf("order %s = %+v, accepted %+v at %d cents", o.ID, o, b, sale.PriceCents)
		}
	}
	// The orders are the sale movements: no row of their own, and the
	// ledger's sums count each order's units once.
	var rows int
	if err := p.DB.Get(&rows, "SELECT COUNT(*) FROM stock_movements WHERE sale_id = ? AND reason = 'sale'", sale.ID); err != nil {
		t.Fatal(err)
	}
	var units int64
	for _, b := range want {
		units += b.Qty
	}
	led, err := p.Ledger.Totals(context.Background(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 0 || led.Movements[seckill.ReasonSale] != -units || led.Available() != led.Total-led.Sold() {
		t.Errorf("%d sale movement rows, sale movements %d, available %d; want 0, %d, %d",
			rows, led.Movements[seckill.ReasonSale], led.Available(), -units, led.Total-led.Sold())
	}
}

// reconciler checks Redis against MySQL.
func (p *pipeline) reconciler() *worker.Reconciler {
	return worker.NewReconciler(p.Inventory, p.Ledger, nil, system.ReconcilerConfig(p.Config, p.broker))
}

// checkReconciles waits for the pipeline to settle and requires no drift.
func (p *pipeline) checkReconciles(t *testing.T, sale int64) {
	t.Helper()
	rep, err := p.reconciler().Wait(context.Background(), sale, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drift) > 0 || !rep.Settled() {
		t.Errorf("sale %d does not reconcile: %+v", sale, rep)
	}
}

// proxy is an in-process toxiproxy in front of upstream (servertest.Proxy).
func proxy(t *testing.T, name, upstream string) *toxiproxy.Proxy {
	return servertest.Proxy(t, name, upstream)
}

// viaProxy rewrites a host:port inside s to go through p.
func viaProxy(s, hostport string, p *toxiproxy.Proxy) string {
	return strings.Replace(s, hostport, p.Listen, 1)
}

func mysqlAddr(t *testing.T, dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return c.Addr
}
