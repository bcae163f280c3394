package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/cmd/seckill/bench"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/system/servertest/topology"
	"github.com/seckill/seckill/worker"
)

// The payment faults' shape: each shopper has one order of payPrice and a
// wallet of twice that, so a second charge would fit and show.
const payShoppers, payPrice = 300, 500

// payFault is a payment burst's setting: its shoppers' tokens and orders,
// on env, with the pipeline running in the test.
type payFault struct {
	env     *servertest.Env
	broker  *rabbitmq.Bus
	tokens  []string
	orders  []string
	shopper func(i int) string
}

// newPayFault starts the pipeline with its workers writing to the ledger
// through ledger (nil: env's), makes the shoppers, funds them and has
// each buy one unit through the server at base.
func newPayFault(t *testing.T, env *servertest.Env, base string, ledger *sqlx.DB) *payFault {
	t.Helper()
	if ledger == nil {
		ledger = env.DB
	}
	f := &payFault{env: env, broker: env.StartPipelineOn(t, ledger), tokens: make([]string, payShoppers), orders: make([]string, payShoppers),
		shopper: func(i int) string { return fmt.Sprint("payfault-", i) }}
	sale := servertest.MustSale(t, env.Server(t, nil), servertest.SaleSpec{Total: payShoppers, Limit: 1, PriceCents: payPrice})
	for i := range payShoppers {
		f.tokens[i] = servertest.Token(t, f.shopper(i))
		env.Fund(t, f.shopper(i), 2*payPrice)
		var ans struct {
			OrderID string `json:"order_id"`
		}
		if code := post(t, base, fmt.Sprintf("/api/sales/%d/buy", sale.ID), f.tokens[i],
			map[string]any{"qty": 1, "request_id": fmt.Sprintf("payfault-buy-%04d", i)}, &ans); code != http.StatusOK {
			t.Fatalf("buy %d: %d", i, code)
		}
		f.orders[i] = ans.OrderID
	}
	return f
}

// pay has every shopper pay its order through base, 32 at once, and
// calls fault once a third have answered; it returns the orders answered
// 200.
func (f *payFault) pay(t *testing.T, base string, fault func()) map[string]bool {
	var (
		mu       sync.Mutex
		paid     = map[string]bool{}
		answered atomic.Int64
		once     sync.Once
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 32)
	)
	for i := range payShoppers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if post(t, base, "/api/orders/"+f.orders[i]+"/pay", f.tokens[i], nil, nil) == http.StatusOK {
				mu.Lock()
				paid[f.orders[i]] = true
				mu.Unlock()
			}
			if answered.Add(1) == payShoppers/3 {
				once.Do(fault)
			}
		})
	}
	wg.Wait()
	return paid
}

// payAgain has every shopper pay again through base, as a client whose
// request failed does: until 200, backing off 100 ms after an error, for
// 30 s at most. It fails the test for a payment never answered 200.
func (f *payFault) payAgain(t *testing.T, base string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range payShoppers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			codes := map[int]int{}
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				code := post(t, base, "/api/orders/"+f.orders[i]+"/pay", f.tokens[i], nil, nil)
				if code == http.StatusOK {
					return
				}
				codes[code]++
			}
			t.Errorf("paying %s again: never 200 in 30 s (answers %v)", f.orders[i], codes)
		})
	}
	wg.Wait()
}

// recover has every shopper pay again through base, checks the books
// (check) and logs what the fault caught: paid, the payments answered 200
// while it struck, inFlight those charged and not in the ledger after it.
func (f *payFault) recover(t *testing.T, base string, paid map[string]bool, inFlight int, fault string) {
	t.Helper()
	f.payAgain(t, base)
	f.check(t, paid)
	t.Logf("%d of %d payments answered 200 %s, %d charged and not in the ledger yet; all paid once after the retries",
		len(paid), payShoppers, fault, inFlight)
}

// charged counts the orders charged in Redis (paid) that the ledger does
// not show paid yet (or does not hold yet): payments the fault caught on
// their way to it.
func (f *payFault) charged(t *testing.T) int {
	n := 0
	for i, id := range f.orders {
		o, _ := f.env.Ledger.Order(t.Context(), id) // not found: zero, not paid
		b, _ := f.env.Funds.Balance(t.Context(), seckill.WalletOf(f.shopper(i)))
		if o.Status != seckill.OrderPaid && b == payPrice {
			n++
		}
	}
	return n
}

// check fails the test unless, once the funds pipeline drained and Redis
// and the ledger reconcile to the cent, every order is paid with its
// charge and every wallet charged exactly once.
func (f *payFault) check(t *testing.T, before map[string]bool) {
	t.Helper()
	sys := system.New(f.env.Config, system.Conns{Redis: f.env.Redis, DB: f.env.DB, Bus: f.broker}, nil)
	fr := worker.NewFundsReconciler(sys.Funds, f.env.Ledger, f.broker, nil)
	servertest.WaitFor(t, 60*time.Second, "the funds reconciled", func() (bool, string) {
		rep, err := fr.Check(t.Context())
		return err == nil && !rep.InFlight && len(rep.Drift) == 0 && rep.RedisSum == 0 && rep.LedgerSum == 0, fmt.Sprintf("%+v %v", rep, err)
	})
	for i, id := range f.orders {
		o, err := f.env.Ledger.Order(t.Context(), id)
		if err != nil || o.Status != seckill.OrderPaid || o.ChargeID == "" {
			t.Errorf("order %s (answered paid before the fault: %v): %+v %v", id, before[id], o, err)
		}
		if b, err := f.env.Funds.Balance(t.Context(), seckill.WalletOf(f.shopper(i))); err != nil || b != payPrice {
			t.Errorf("shopper %d's wallet holds %d (%v), want %d: charged other than once", i, b, err, payPrice)
		}
	}
}

// TestPaymentsSurviveServerKill: the shoppers pay at once through a
// `seckill serve` killed with SIGKILL a third of the way in, then pay
// again through a fresh process, as clients whose request failed do.
// Every payment answered 200 before the kill is paid; after the retries
// every order is paid and charged once (a charge made before the kill and
// never answered is found made, not made again); the books reconcile to
// the cent.
func TestPaymentsSurviveServerKill(t *testing.T) {
	bin := servertest.Binary(t)
	env := servertest.New(t, "SECKILL_RELAY_CLAIM_IDLE=2s") // the dead process's outbox entries claimed soon
	first, err := bench.StartServe(context.Background(), bin, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	f := newPayFault(t, env, "http://"+first.Addr, nil)
	paid := f.pay(t, "http://"+first.Addr, first.Kill)
	if len(paid) == 0 || len(paid) == payShoppers {
		t.Fatalf("%d of %d payments answered 200 before the kill: it did not land mid-burst", len(paid), payShoppers)
	}
	inFlight := f.charged(t)
	second, err := bench.StartServe(context.Background(), bin, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.Stop)
	f.recover(t, "http://"+second.Addr, paid, inFlight, "before the SIGKILL")
}

// TestPaymentsSurviveMySQLOutage: the shoppers pay through a `seckill
// serve` whose MySQL is cut off (a proxy stopped) a third of the way in.
// A first payment in its window reads nothing from MySQL (its order and
// merchant come from the sale's Redis keys), so every one answers 200.
// MySQL back, the clients pay again (a retry reads the ledger): each
// answers 200, every order is paid and charged once and the books
// reconcile.
func TestPaymentsSurviveMySQLOutage(t *testing.T) {
	bin := servertest.Binary(t)
	env := servertest.New(t)
	dsn, err := mysql.ParseDSN(env.Config.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	px := servertest.Proxy(t, "mysql", dsn.Addr)
	viaProxy := strings.Replace(env.Config.MySQL.DSN, dsn.Addr, px.Listen, 1)
	child, err := bench.Start(context.Background(), bin, env.Config, []string{"SECKILL_MYSQL_DSN=" + viaProxy}, "serve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(child.Stop)
	// The workers lose MySQL too.
	workers, err := orders.Open(t.Context(), viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { workers.Close() })
	f := newPayFault(t, env, "http://"+child.Addr, workers)
	paid := f.pay(t, "http://"+child.Addr, px.Stop)
	if len(paid) != payShoppers {
		t.Errorf("%d of %d payments answered 200 with MySQL cut a third of the way in; all should", len(paid), payShoppers)
	}
	inFlight := f.charged(t)
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, 30*time.Second, "the server ready again", func() (bool, string) {
		res, err := http.Get("http://" + child.Addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
	f.recover(t, "http://"+child.Addr, paid, inFlight, "with MySQL cut a third of the way in")
}

// TestPaymentsSurviveRedisKill: the shoppers pay through a `seckill
// serve` whose Redis (appendonly, as production's) is killed with SIGKILL
// a third of the way in and started again from its AOF: no payment
// answered 200 is lost, the clients pay again, every order is paid and
// charged once, and the books reconcile with no repair needed.
func TestPaymentsSurviveRedisKill(t *testing.T) {
	bin := servertest.Binary(t)
	node, err := topology.StartRedis(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Kill)
	on := []string{"SECKILL_REDIS_ADDR=" + node.Addr(), "SECKILL_REDIS_DB=0"}
	env := servertest.New(t, on...)
	child, err := bench.Start(context.Background(), bin, env.Config, on, "serve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(child.Stop)
	f := newPayFault(t, env, "http://"+child.Addr, nil)
	paid := f.pay(t, "http://"+child.Addr, node.Kill)
	if len(paid) == 0 || len(paid) == payShoppers {
		t.Fatalf("%d of %d payments answered 200 with Redis killed a third of the way in", len(paid), payShoppers)
	}
	if err := node.Restart(); err != nil {
		t.Fatal(err)
	}
	inFlight := f.charged(t)
	f.recover(t, "http://"+child.Addr, paid, inFlight, "before Redis was killed")
}
