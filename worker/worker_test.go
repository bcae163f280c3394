package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/memory"
	"github.com/seckill/seckill/inventory"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

func TestPipelineHappyPath(t *testing.T) {
	eachBus(t, nil, testPipelineHappyPath)
}

func testPipelineHappyPath(t *testing.T, p *pipeline) {
	p.startAll(t)
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 3000, Limit: 2, PriceCents: 1250})
	accepted := p.buy(t, sale, 2000, 64, "happy")
	if len(accepted) != 2000 {
		t.Fatalf("%d of 2000 buys accepted", len(accepted))
	}
	p.waitPersisted(t, sale.ID, 2000, 30*time.Second)
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
	if n := p.Redis.XLen(context.Background(), p.Keys.Part(inventory.First(sale.ID).Tag).Outbox()).Val(); n != 0 {
		t.Errorf("outbox still holds %d events", n)
	}
}

// TestBrokerOutage cuts RabbitMQ off from the relay and the worker for 10 s
// in the middle of a burst of buys.
func TestBrokerOutage(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	px := proxy(t, "rabbitmq", "127.0.0.1:5672")
	cfg := p.Config
	cfg.AMQP.URL = viaProxy(cfg.AMQP.URL, "127.0.0.1:5672", px)
	relayBroker, workerBroker := servertest.NewBroker(cfg), servertest.NewBroker(cfg)
	t.Cleanup(func() { relayBroker.Close(); workerBroker.Close() })
	run(t, p.relay(relayBroker).Run)
	p.consumers(t, workerBroker, p.Ledger)

	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 2000, Limit: 2, PriceCents: 100})
	accepted := p.buy(t, sale, 400, 32, "before")
	px.Stop()
	outage := time.Now()
	accepted = append(accepted, p.buy(t, sale, 400, 32, "during")...)
	time.Sleep(10*time.Second - time.Since(outage)) // the length of the outage, not a wait for a condition
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	accepted = append(accepted, p.buy(t, sale, 400, 32, "after")...)
	if len(accepted) != 1200 {
		t.Fatalf("%d of 1200 buys accepted", len(accepted))
	}
	p.waitPersisted(t, sale.ID, len(accepted), 60*time.Second)
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
}

// TestMySQLOutage cuts MySQL off from the worker for 10 s mid-burst: the
// messages wait unacknowledged, then drain.
func TestMySQLOutage(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	addr := mysqlAddr(t, p.Config.MySQL.DSN)
	px := proxy(t, "mysql", addr)
	db, err := orders.Open(context.Background(), viaProxy(p.Config.MySQL.DSN, addr, px))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	run(t, p.relay(p.broker).Run)
	p.consumers(t, p.broker, orders.NewStore(db))

	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 2000, Limit: 2, PriceCents: 100})
	accepted := p.buy(t, sale, 300, 32, "before")
	px.Stop()
	outage := time.Now()
	accepted = append(accepted, p.buy(t, sale, 500, 32, "during")...)
	// While MySQL is away, the worker holds the orders unacknowledged and
	// retries. (The queue may show none ready: with prefetch the broker
	// hands them all to the worker, so its depth says nothing here.)
	servertest.WaitFor(t, 8*time.Second, "the worker to retry the ledger while MySQL is down", func() (bool, string) {
		n := p.counter(t, "seckill_worker_db_retries_total")
		return n > 0, fmt.Sprint(n, " retries")
	})
	time.Sleep(10*time.Second - time.Since(outage)) // the length of the outage
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	p.waitPersisted(t, sale.ID, len(accepted), 60*time.Second)
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
}

// TestWorkerKilledMidBatch runs `seckill worker` as a process, kills it
// with SIGKILL while it is writing, and starts another.
func TestWorkerKilledMidBatch(t *testing.T) {
	t.Parallel()
	bin := servertest.Binary(t)
	p := newPipeline(t, "SECKILL_WORKER_BATCH=200")
	run(t, p.relay(p.broker).Run)
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 9000, Limit: 2, PriceCents: 100})
	accepted := p.buy(t, sale, 6000, 64, "kill")
	if len(accepted) != 6000 {
		t.Fatalf("%d of 6000 buys accepted", len(accepted))
	}
	first := startWorker(t, bin, p)
	servertest.WaitFor(t, 30*time.Second, "the first worker to be mid-stream", func() (bool, string) {
		var n int
		_ = p.DB.Get(&n, "SELECT COUNT(*) FROM orders WHERE sale_id = ?", sale.ID)
		return n >= 1000, fmt.Sprint(n, " persisted")
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	var atKill int
	_ = p.DB.Get(&atKill, "SELECT COUNT(*) FROM orders WHERE sale_id = ?", sale.ID)
	t.Logf("killed the worker with %d of %d orders persisted", atKill, len(accepted))
	startWorker(t, bin, p)
	p.waitPersisted(t, sale.ID, len(accepted), 60*time.Second)
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
}

// startWorker runs `seckill worker` on the pipeline's config.
func startWorker(t *testing.T, bin string, p *pipeline) *exec.Cmd {
	t.Helper()
	c := p.Config
	cmd := exec.Command(bin, "worker")
	cmd.Env = append(os.Environ(),
		"SECKILL_REDIS_PREFIX="+c.Redis.Prefix, "SECKILL_REDIS_DB="+fmt.Sprint(c.Redis.DB),
		"SECKILL_AMQP_PREFIX="+c.AMQP.Prefix, "SECKILL_MYSQL_DSN="+c.MySQL.DSN,
		"SECKILL_WORKER_BATCH="+fmt.Sprint(c.Orders.WorkerBatch), "SECKILL_WORKER_METRICS_ADDR=",
		"SECKILL_PAYMENT_WINDOW="+c.Orders.PaymentWindow.String(), "SECKILL_LOG_LEVEL=warn",
	)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	return cmd
}

// TestDeadRelayDuplicatesAbsorbed: a relay publishes a batch and dies before
// removing it from the stream. A live relay claims the batch and publishes
// it again; the worker keeps one order each.
func TestDeadRelayDuplicatesAbsorbed(t *testing.T) {
	eachBus(t, nil, testDeadRelayDuplicatesAbsorbed)
}

func testDeadRelayDuplicatesAbsorbed(t *testing.T, p *pipeline) {
	ctx := context.Background()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 1000, Limit: 2, PriceCents: 100})
	accepted := p.buy(t, sale, 300, 32, "dead")

	// The dead relay: reads the events into its pending list, publishes them
	// with confirms, never acknowledges them in the stream.
	stream := p.Keys.Part(inventory.First(sale.ID).Tag).Outbox()
	if err := p.Redis.XGroupCreate(ctx, stream, "relay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := p.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "dead-relay", Streams: []string{stream, ">"}, Count: 1000}).Result()
	if err != nil {
		t.Fatalf("dead relay read %v, %v", res, err)
	}
	published := 0
	for _, m := range res[0].Messages {
		evs, err := inventory.DecodeOutbox(m.Values)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			body, _ := json.Marshal(ev)
			mustPublish(t, p, body)
			published++
		}
	}
	if published != len(accepted) {
		t.Fatalf("dead relay read %d events of %d accepted orders", published, len(accepted))
	}

	p.startAll(t)
	p.waitPersisted(t, sale.ID, len(accepted), 30*time.Second)
	servertest.WaitFor(t, 30*time.Second, "the outbox to empty", func() (bool, string) {
		n := p.Redis.XLen(ctx, stream).Val()
		return n == 0, fmt.Sprint(n, " events left")
	})
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
}

// mustPublish puts a message body straight onto the orders queue.
func mustPublish(t *testing.T, p *pipeline, body []byte) {
	t.Helper()
	if _, err := p.broker.Publish(context.Background(), bus.Orders, bus.Message{ID: "raw", Body: body}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// TestPoisonMessagesDeadLettered: malformed events and an event of an
// unknown sale end in the dead-letter queue; valid orders keep flowing.
func TestPoisonMessagesDeadLettered(t *testing.T) {
	eachBus(t, nil, testPoisonMessagesDeadLettered)
}

func testPoisonMessagesDeadLettered(t *testing.T, p *pipeline) {
	p.startAll(t)
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 1000, Limit: 2, PriceCents: 100})
	var accepted []bought
	unknownSale := seckill.Event{OrderID: ulid.Make().String() + "-999999999", SaleID: 999999999, UserID: "ghost",
		Qty: 1, PriceCents: 1, RequestID: "ghost-request", At: time.Now().UnixMilli()}
	unknownBody, _ := json.Marshal(unknownSale)
	badPack, _ := json.Marshal([]any{unknownSale, map[string]any{"order_id": "y"}})
	poison := [][]byte{[]byte("not json at all"), []byte(`{"order_id":"x","surprise":true}`), unknownBody, badPack}
	for i, body := range poison {
		accepted = append(accepted, p.buy(t, sale, 100, 16, fmt.Sprint("poison", i))...)
		mustPublish(t, p, body)
	}
	// An outbox entry the relay cannot read travels alone, so the events
	// packed around it still arrive.
	err := p.Redis.XAdd(context.Background(), &redis.XAddArgs{
		Stream: p.Keys.Part(inventory.First(sale.ID).Tag).Outbox(), Values: map[string]any{"order_id": "broken", "qty": "many"},
	}).Err()
	if err != nil {
		t.Fatal(err)
	}
	accepted = append(accepted, p.buy(t, sale, 100, 16, "poison-last")...)
	p.waitPersisted(t, sale.ID, len(accepted), 30*time.Second)
	want := len(poison) + 1
	servertest.WaitFor(t, 30*time.Second, "the poison in the dead-letter queue", func() (bool, string) {
		n, err := p.broker.Depth(context.Background(), bus.Dead)
		return err == nil && n == want, fmt.Sprint(n, err)
	})
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
}

// TestPaymentTimeout: unpaid orders are cancelled when their window ends
// and their units can be bought again; paid orders stay paid.
func TestPaymentTimeout(t *testing.T) {
	eachBus(t, []string{"SECKILL_PAYMENT_WINDOW=2s"}, testPaymentTimeout)
}

func testPaymentTimeout(t *testing.T, p *pipeline) {
	p.startAll(t)
	ctx := context.Background()
	h := p.srv.Handler()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 10, Limit: 1, PriceCents: 700})
	accepted := p.buy(t, sale, 10, 10, "timeout")
	if len(accepted) != 10 {
		t.Fatalf("%d of 10 accepted", len(accepted))
	}
	if status, _ := buyOnce(t, h, sale.ID, "late-user", 1, "late-request"); status != http.StatusConflict {
		t.Fatalf("buy of a sold-out sale: %d", status)
	}
	for _, b := range accepted {
		p.Fund(t, b.User, 700)
	}
	paid := map[string]bool{}
	for _, b := range accepted[:4] {
		if status, body := pay(t, h, b); status != http.StatusOK {
			t.Fatalf("pay %s: %d %s", b.OrderID, status, body)
		}
		paid[b.OrderID] = true
	}
	servertest.WaitFor(t, 20*time.Second, "six unpaid orders cancelled and their stock back", func() (bool, string) {
		st, err := p.Inventory.Stock(ctx, sale.ID)
		var n int
		_ = p.DB.Get(&n, "SELECT COUNT(*) FROM orders WHERE sale_id = ? AND status = 'cancelled'", sale.ID)
		return err == nil && st.Available == 6 && n == 6, fmt.Sprintf("%d cancelled, stock %+v", n, st)
	})
	for _, b := range accepted {
		o, err := p.Ledger.Order(ctx, b.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		want := seckill.OrderCancelled
		if paid[b.OrderID] {
			want = seckill.OrderPaid
		}
		if o.Status != want {
			t.Errorf("order %s is %s, want %s", o.ID, o.Status, want)
		}
		// Paid and charged, or cancelled and uncharged.
		wantBalance := int64(700)
		if paid[b.OrderID] {
			wantBalance = 0
		}
		if bal, err := p.Funds.Balance(ctx, seckill.WalletOf(b.User)); err != nil || bal != wantBalance {
			t.Errorf("%s's wallet holds %d (%v), want %d", b.User, bal, err, wantBalance)
		}
		if !paid[b.OrderID] {
			if status, body := pay(t, h, b); status != http.StatusConflict || !strings.Contains(body, "order_cancelled") {
				t.Errorf("paying cancelled order %s: %d %s", b.OrderID, status, body)
			}
		}
	}
	// The returned units sell again, and no more than them.
	again := p.buy(t, sale, 7, 7, "second-wave")
	if len(again) != 6 {
		t.Errorf("%d of 7 second-wave buys accepted, want the 6 returned units", len(again))
	}
	p.waitPersisted(t, sale.ID, 16, 20*time.Second)
	var cancelMoves int64
	_ = p.DB.Get(&cancelMoves, "SELECT COALESCE(SUM(delta), 0) FROM stock_movements WHERE sale_id = ? AND reason = 'cancel'", sale.ID)
	if cancelMoves != 6 {
		t.Errorf("cancel movements sum to %d, want 6", cancelMoves)
	}
	for _, b := range again {
		p.Fund(t, b.User, 700)
		if status, body := pay(t, h, b); status != http.StatusOK {
			t.Errorf("pay %s: %d %s", b.OrderID, status, body)
		}
	}
	p.checkReconciles(t, sale.ID)
}

// TestPayRacesTimeout pays orders right around the end of their window,
// many times: each order ends paid and charged, or cancelled and
// uncharged, never both and never neither, and the answer the buyer got
// matches.
func TestPayRacesTimeout(t *testing.T) {
	eachBus(t, []string{"SECKILL_PAYMENT_WINDOW=1s"}, testPayRacesTimeout)
}

func testPayRacesTimeout(t *testing.T, p *pipeline) {
	p.startAll(t)
	ctx := context.Background()
	h := p.srv.Handler()
	const n = 80
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: n, Limit: 1, PriceCents: 100})
	accepted := p.buy(t, sale, n, n, "race")
	p.waitPersisted(t, sale.ID, n, 20*time.Second)
	for _, b := range accepted {
		p.Fund(t, b.User, 100)
	}

	answers := make([]int, len(accepted))
	var wg sync.WaitGroup
	for i, b := range accepted {
		o, err := p.Ledger.Order(ctx, b.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		// Spread the payments from 40 ms before to 40 ms after the deadline.
		at := o.ExpiresAt.Add(time.Duration(i%9-4) * 10 * time.Millisecond)
		wg.Go(func() {
			time.Sleep(time.Until(at)) // the moment this buyer pays, part of the scenario
			answers[i], _ = pay(t, h, b)
		})
	}
	wg.Wait()
	servertest.WaitFor(t, 20*time.Second, "every order paid or cancelled", func() (bool, string) {
		var pending int
		_ = p.DB.Get(&pending, "SELECT COUNT(*) FROM orders WHERE sale_id = ? AND status = 'pending'", sale.ID)
		return pending == 0, fmt.Sprint(pending, " pending")
	})
	var paidUnits int64
	counts := map[seckill.OrderStatus]int{}
	for i, b := range accepted {
		o, _ := p.Ledger.Order(ctx, b.OrderID)
		counts[o.Status]++
		bal, err := p.Funds.Balance(ctx, seckill.WalletOf(b.User))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case answers[i] == http.StatusOK && o.Status == seckill.OrderPaid && o.CancelledAt == nil && bal == 0:
			paidUnits += o.Qty
		case answers[i] == http.StatusConflict && o.Status == seckill.OrderCancelled && o.PaidAt == nil && bal == 100:
		default:
			t.Errorf("order %s: pay answered %d, order is %s (paid_at %v, cancelled_at %v), wallet %d", o.ID, answers[i],
				o.Status, o.PaidAt, o.CancelledAt, bal)
		}
	}
	t.Logf("around the deadline: %v", counts)
	p.checkReconciles(t, sale.ID)
	if st, _ := p.Inventory.Stock(ctx, sale.ID); st.Sold != paidUnits {
		t.Errorf("redis sold %d, paid units %d", st.Sold, paidUnits)
	}
}

// TestTimeoutPaysAChargeTheLedgerHolds: an order pending in the ledger
// whose charge the ledger holds already (written by a release before a
// charge set its order paid with it) is paid by its timeout, not
// cancelled: its charge is made, so it is paid; its units stay sold.
func TestTimeoutPaysAChargeTheLedgerHolds(t *testing.T) {
	p := newPipeline(t, "SECKILL_PAYMENT_WINDOW=3s")
	p.startAll(t)
	ctx := context.Background()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 2, Limit: 1, PriceCents: 300})
	accepted := p.buy(t, sale, 1, 1, "legacy")
	p.waitPersisted(t, sale.ID, 1, 20*time.Second)
	b := accepted[0]
	o, err := p.Ledger.Order(ctx, b.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	p.Fund(t, b.User, 300)
	charge, _ := seckill.ChargeMovement(o, 0, 0, time.Now())
	if _, _, err := p.Funds.Move(ctx, charge); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, 10*time.Second, "the charge in the ledger", func() (bool, string) {
		o, err := p.Ledger.Order(ctx, b.OrderID)
		return err == nil && o.Status == seckill.OrderPaid, fmt.Sprintf("%+v %v", o, err)
	})
	// As the earlier release left it: the charge written, the order pending.
	if _, err := p.DB.Exec("UPDATE orders SET status = 'pending', charge_id = NULL, paid_at = NULL WHERE id = ?", b.OrderID); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(o.ExpiresAt) {
		t.Fatal("the window ended before the order was set back to pending: the scenario did not happen")
	}
	servertest.WaitFor(t, 20*time.Second, "the timeout to pay it", func() (bool, string) {
		o, err := p.Ledger.Order(ctx, b.OrderID)
		return err == nil && o.Status == seckill.OrderPaid && o.ChargeID == charge.ID, fmt.Sprintf("%+v %v", o, err)
	})
	if bal, err := p.Funds.Balance(ctx, seckill.WalletOf(b.User)); err != nil || bal != 0 {
		t.Errorf("the wallet holds %d (%v), want 0", bal, err)
	}
	if st, err := p.Inventory.Stock(ctx, sale.ID); err != nil || st.Available != 1 {
		t.Errorf("stock %+v (%v): the paid unit went back", st, err)
	}
}

func pay(t testing.TB, h http.Handler, b bought) (int, string) {
	req, _ := http.NewRequest("POST", "/api/orders/"+b.OrderID+"/pay", nil)
	req.Header.Set("Authorization", "Bearer "+servertest.Token(t, b.User))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestReconcile: agreement after a clean run; drift after a counter is
// tampered with; --repair after FLUSHDB restores the sale so buying resumes
// with the right stock and per-user counts.
func TestReconcile(t *testing.T) {
	eachBus(t, nil, testReconcile)
}

func testReconcile(t *testing.T, p *pipeline) {
	p.startAll(t)
	ctx := context.Background()
	h := p.srv.Handler()
	rc := p.reconciler()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 100, Limit: 2, PriceCents: 100})
	accepted := p.buy(t, sale, 40, 16, "rec") // 60 units: 20 users with 1, 20 with 2
	_, firstOrder := buyOnce(t, h, sale.ID, "rec-user-0", 1, "rec-req-000000")
	p.waitPersisted(t, sale.ID, len(accepted), 20*time.Second)
	p.checkReconciles(t, sale.ID)

	// Tampering with a counter is drift.
	p.Redis.HIncrBy(ctx, p.Keys.Part(inventory.First(sale.ID).Tag).Stock(), "sold", 1)
	rep, err := rc.Check(ctx, sale.ID)
	if err != nil || len(rep.Drift) == 0 {
		t.Fatalf("tampered sold not reported: %+v, %v", rep, err)
	}
	t.Logf("drift reported: %v", rep.Drift)
	p.Redis.HIncrBy(ctx, p.Keys.Part(inventory.First(sale.ID).Tag).Stock(), "sold", -1)
	p.Redis.HIncrBy(ctx, p.Keys.Part(inventory.First(sale.ID).Tag).Buyers(), "rec-user-3", 1)
	if rep, _ := rc.Check(ctx, sale.ID); len(rep.Drift) == 0 {
		t.Fatalf("tampered buyer not reported: %+v", rep)
	}
	p.Redis.HIncrBy(ctx, p.Keys.Part(inventory.First(sale.ID).Tag).Buyers(), "rec-user-3", -1)

	// Redis loses everything (of this deployment).
	servertest.DeleteKeys(t, p.Redis, p.Config.Redis.Prefix+":*")
	if status, _ := buyOnce(t, h, sale.ID, "newcomer", 1, "newcomer-01"); status != http.StatusNotFound {
		t.Errorf("buy after FLUSHDB: %d, want 404", status)
	}
	if rep, _ := rc.Check(ctx, sale.ID); len(rep.Drift) == 0 {
		t.Fatalf("lost Redis not reported: %+v", rep)
	}
	if err := rc.Repair(ctx, sale.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.checkReconciles(t, sale.ID)
	st, _ := p.Inventory.Stock(ctx, sale.ID)
	if st.Available != 40 || st.Sold != 60 {
		t.Errorf("after repair stock = %+v, want 40 available, 60 sold", st)
	}
	// user-1 holds 2 (the limit), user-0 holds 1: the caps survived.
	if status, _ := buyOnce(t, h, sale.ID, "rec-user-1", 1, "after-repair-1"); status != http.StatusConflict {
		t.Errorf("user at the limit bought after repair: %d", status)
	}
	if status, _ := buyOnce(t, h, sale.ID, "rec-user-0", 1, "after-repair-0"); status != http.StatusOK {
		t.Errorf("user below the limit refused after repair: %d", status)
	}
	if status, id := buyOnce(t, h, sale.ID, "rec-user-0", 1, "rec-req-000000"); status != http.StatusOK || id != firstOrder {
		t.Errorf("retry of an old request after repair: %d %s, want 200 %s", status, id, firstOrder)
	}
	p.waitPersisted(t, sale.ID, len(accepted)+1, 20*time.Second)
	p.checkReconciles(t, sale.ID)
}

// TestWorkerCrashLoop: a worker killed with SIGKILL while its batch waits
// inside a MySQL transaction, five times over (a crash loop), loses
// nothing and dead-letters nothing: every order answered 200 reaches the
// ledger once the crashes stop.
func TestWorkerCrashLoop(t *testing.T) {
	t.Parallel()
	bin := servertest.Binary(t)
	p := newPipeline(t, "SECKILL_WORKER_BATCH=200")
	ctx := context.Background()
	run(t, p.relay(p.broker).Run)
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 3000, Limit: 2, PriceCents: 100})
	accepted := p.buy(t, sale, 1000, 64, "crash")
	if len(accepted) != 1000 {
		t.Fatalf("%d of 1000 buys accepted", len(accepted))
	}
	servertest.WaitFor(t, 30*time.Second, "the relay to publish every order", func() (bool, string) {
		n := p.Redis.XLen(ctx, p.Keys.Part(inventory.First(sale.ID).Tag).Outbox()).Val()
		return n == 0, fmt.Sprint(n, " entries in the outbox")
	})

	// Hold the sale's row: the worker's INSERTs, whose foreign key check
	// reads it, wait inside their transaction until this one ends.
	lock, err := p.DB.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback() })
	if _, err := lock.Exec("SELECT id FROM sales WHERE id = ? FOR UPDATE", sale.ID); err != nil {
		t.Fatal(err)
	}
	var db string
	if err := p.DB.Get(&db, "SELECT DATABASE()"); err != nil {
		t.Fatal(err)
	}
	waiting := map[int64]bool{}
	for i := range 5 {
		w := startWorker(t, bin, p)
		// An INSERT of this worker's (a connection not seen before: a killed
		// worker's query lingers on the server until the lock is released).
		servertest.WaitFor(t, 30*time.Second, "the worker to wait inside its transaction", func() (bool, string) {
			var ids []int64
			err := p.DB.Select(&ids, `SELECT ID FROM information_schema.PROCESSLIST
				WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE 'INSERT INTO orders%'`, db)
			fresh := false
			for _, id := range ids {
				fresh = fresh || !waiting[id]
				waiting[id] = true
			}
			return err == nil && fresh, fmt.Sprint(len(ids), " inserts waiting ", err)
		})
		if err := w.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = w.Wait()
		t.Logf("crash %d: killed the worker mid-transaction", i+1)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	startWorker(t, bin, p)
	p.waitPersisted(t, sale.ID, len(accepted), 60*time.Second)
	p.checkLedger(t, sale, accepted)
	if n, err := p.broker.Depth(ctx, bus.Dead); err != nil || n != 0 {
		t.Errorf("%d messages dead-lettered by the crash loop (%v)", n, err)
	}
	p.checkReconciles(t, sale.ID)
}

// TestReconcileFindsLostOrders: orders accepted in Redis that never reach
// the ledger (an outbox entry lost, a message dead-lettered, an outbox
// nobody relays) are drift once the grace period has passed, each named
// with where it is; --repair writes them into the ledger instead of
// waiting for them, and the ledger keeps each once when the stragglers
// arrive after all.
func TestReconcileFindsLostOrders(t *testing.T) {
	eachBus(t, []string{"SECKILL_RECONCILE_GRACE=1s"}, testReconcileFindsLostOrders)
}

func testReconcileFindsLostOrders(t *testing.T, p *pipeline) {
	ctx := context.Background()
	rc := p.reconciler()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 100, Limit: 2, PriceCents: 250})
	stream := p.Keys.Part(inventory.First(sale.ID).Tag).Outbox()
	// takeOutbox removes the outbox entries so far and returns their events.
	takeOutbox := func() []seckill.Event {
		entries, err := p.Redis.XRange(ctx, stream, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		var evs []seckill.Event
		for _, e := range entries {
			es, err := inventory.DecodeOutbox(e.Values)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, es...)
			p.Redis.XDel(ctx, stream, e.ID)
		}
		return evs
	}
	lost := p.buy(t, sale, 5, 5, "lost")
	takeOutbox()
	dead := p.buy(t, sale, 5, 5, "dead")
	body, _ := json.Marshal(takeOutbox())
	mustPublish(t, p, body)
	sub, err := p.broker.Subscribe(ctx, bus.Orders, 1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-sub.Deliveries():
		if err := d.DeadLetter("given up by the test"); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dead letter-to-be never arrived")
	}
	sub.Close()
	waiting := p.buy(t, sale, 5, 5, "waiting")

	want := map[string]string{}
	for group, bs := range map[string][]bought{"nowhere": lost, "dead-letter queue": dead, "outbox": waiting} {
		for _, b := range bs {
			want[b.OrderID] = group
		}
	}
	var rep worker.Report
	servertest.WaitFor(t, 20*time.Second, "15 orders reported missing", func() (bool, string) {
		rep, err = rc.Check(ctx, sale.ID)
		return err == nil && len(rep.Missing) == 15, fmt.Sprintf("%d missing, %v", len(rep.Missing), err)
	})
	for _, m := range rep.Missing {
		if !strings.HasPrefix(m.Where, want[m.Order.OrderID]) {
			t.Errorf("order %s is in %q, reported in %q", m.Order.OrderID, want[m.Order.OrderID], m.Where)
		}
	}
	if len(rep.Drift) < 15 {
		t.Errorf("missing orders not reported as drift: %v", rep.Drift)
	}
	t.Logf("drift: %s", rep.Drift[0])

	p.startAll(t)
	if err := rc.Repair(ctx, sale.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	accepted := append(append(lost, dead...), waiting...)
	p.checkLedger(t, sale, accepted)
	// The dead letter sent again changes nothing.
	if n, err := p.broker.Replay(ctx, func(bus.Message) bool { return true }); err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	servertest.WaitFor(t, 20*time.Second, "the replayed message consumed", func() (bool, string) {
		n, err := p.broker.Depth(ctx, bus.Orders)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
}

// TestBucketedSalePipeline: a sale split into 3 buckets goes through the
// pipeline as one sale (every order in the ledger once, reconcile clean),
// and after Redis loses it, the repair rebuilds its buckets from the
// ledger: stock, per-user caps and request ids.
func TestBucketedSalePipeline(t *testing.T) {
	p := newPipeline(t)
	p.startAll(t)
	ctx := context.Background()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 300, Limit: 2, PriceCents: 100, Buckets: 3})
	accepted := p.buy(t, sale, 200, 32, "bucketed")
	if len(accepted) != 200 {
		t.Fatalf("%d of 200 buys accepted", len(accepted))
	}
	p.waitPersisted(t, sale.ID, len(accepted), 30*time.Second)
	p.checkLedger(t, sale, accepted)
	p.checkReconciles(t, sale.ID)
	sold := int64(0)
	for _, b := range accepted {
		sold += b.Qty
	}

	servertest.DeleteKeys(t, p.Redis, p.Config.Redis.Prefix+":*")
	p.Inventory = inventory.New(p.Redis, system.InventoryConfig(p.Config)) // a process that never saw the sale
	if err := p.reconciler().Repair(ctx, sale.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	parts, err := p.Inventory.Parts(ctx, sale.ID)
	if err != nil || len(parts) != 3 {
		t.Fatalf("parts after the repair: %v, %v", parts, err)
	}
	st, _ := p.Inventory.Stock(ctx, sale.ID)
	if st.Sold != sold || st.Available != 300-sold || st.Total != 300 {
		t.Errorf("after the repair: %+v, want %d sold", st, sold)
	}
	p.checkReconciles(t, sale.ID)
	srv := p.Env.Server(t, nil)
	for _, b := range accepted[:20] {
		if b.Qty == 2 {
			if status, _ := buyOnce(t, srv.Handler(), sale.ID, b.User, 1, "bucketed-over"); status != http.StatusConflict {
				t.Errorf("%s at the limit bought after the repair: %d", b.User, status)
			}
		}
	}
}

// TestReconcileLocatesBucketedOutbox: orders of a bucketed sale waiting in
// the outbox of any bucket, past the grace period, are reported as in the
// outbox, not as lost (the reconciler once read the first bucket's outbox
// only).
func TestReconcileLocatesBucketedOutbox(t *testing.T) {
	p := barePipeline(t, "SECKILL_RECONCILE_GRACE=1s")
	b := memory.New()
	t.Cleanup(func() { b.Close() })
	p.broker = b
	ctx := context.Background()
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 100, Limit: 2, PriceCents: 100, Buckets: 3})
	waiting := p.buy(t, sale, 30, 8, "bucket-waiting") // no relay runs: every order waits in its bucket's outbox
	parts, err := p.Inventory.Parts(ctx, sale.ID)
	if err != nil || len(parts) != 3 {
		t.Fatalf("parts: %v, %v", parts, err)
	}
	inOthers := 0
	for _, part := range parts[1:] {
		inOthers += int(p.Redis.XLen(ctx, p.Keys.Part(part.Tag).Outbox()).Val())
	}
	if inOthers == 0 {
		t.Fatal("no order landed in a bucket but the first: the test proves nothing")
	}
	rc := p.reconciler()
	var rep worker.Report
	servertest.WaitFor(t, 20*time.Second, "every order reported missing", func() (bool, string) {
		rep, err = rc.Check(ctx, sale.ID)
		return err == nil && len(rep.Missing) == len(waiting), fmt.Sprintf("%d missing, %v", len(rep.Missing), err)
	})
	for _, m := range rep.Missing {
		if m.Where != "outbox" {
			t.Errorf("order %s waits in its bucket's outbox, reported in %q", m.Order.OrderID, m.Where)
		}
	}
	p.startAll(t)
	p.waitPersisted(t, sale.ID, len(waiting), 30*time.Second)
	p.checkReconciles(t, sale.ID)
}
