package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/funds"
	"github.com/seckill/seckill/internal/rdb"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/worker"
)

// fundsStore is a funds store on the pipeline's Redis, as a process of
// its own holds one: the relay built on it hears of its movements.
func (p *pipeline) fundsStore() *funds.Store {
	return funds.New(p.Redis, system.FundsConfig(p.Config))
}

// fundsRelay is a funds relay of s's outboxes publishing to b, sweeping
// more often than a process does (the tests wait less).
func (p *pipeline) fundsRelay(s *funds.Store, b bus.Bus) *worker.FundsRelay {
	cfg := system.FundsRelayConfig(p.Config)
	cfg.Sweep = 200 * time.Millisecond
	return worker.NewFundsRelay(s, b, p.metrics.FundsRelay, cfg)
}

// fundsConsumer runs a funds consumer of b writing to ledger and
// following with s until the test ends.
func (p *pipeline) fundsConsumer(t *testing.T, b bus.Bus, ledger *orders.Store, s *funds.Store) {
	run(t, worker.NewFundsConsumer(b, ledger, s, p.metrics.Funds, p.metrics.Consumers, system.FundsConsumerConfig(p.Config)).Run)
}

// labelled is the value of a counter's series of queue.
func (p *pipeline) labelled(t *testing.T, name, queue string) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == queue {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{queue=%q}", name, queue)
	return 0
}

// move decides the movements on s, concurrency at a time, and returns
// those made; a refusal for want of funds is expected of none.
func move(t *testing.T, s *funds.Store, ms []seckill.Movement, concurrency int) []seckill.Movement {
	t.Helper()
	var (
		mu   sync.Mutex
		made []seckill.Movement
		wg   sync.WaitGroup
		sem  = make(chan struct{}, concurrency)
	)
	for _, m := range ms {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, ok, err := s.Move(context.Background(), m)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("move %s: %v", m.ID, err)
			case !ok:
				t.Errorf("move %s: made before", m.ID)
			default:
				made = append(made, m)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return made
}

// credits are the operator's credits of cents to each of users, per times
// each (request ids of their own for each amount).
func credits(tag string, users, per int, cents int64) []seckill.Movement {
	var ms []seckill.Movement
	for i := range per {
		for u := range users {
			ms = append(ms, seckill.CreditMovement(fmt.Sprintf("%s-user-%d", tag, u), fmt.Sprintf("r%d-%d", i, cents), cents, time.Now()))
		}
	}
	return ms
}

// charges pay per made-up orders of cents for each of users, to three
// merchants, with the platform's fee.
func charges(tag string, users, per int, cents int64) []seckill.Movement {
	var ms []seckill.Movement
	for i := range per {
		for u := range users {
			user := fmt.Sprintf("%s-user-%d", tag, u)
			o := seckill.Order{ID: fmt.Sprintf("%s-o-%d-%d", tag, u, i), UserID: user, Qty: 1, UnitPriceCents: cents, AmountCents: cents}
			m, _ := seckill.ChargeMovement(o, int64(1+u%3), 250, time.Now())
			ms = append(ms, m)
		}
	}
	return ms
}

// waitFunds waits until the ledger holds the transfers of made and Redis
// agrees with it on every account, then checks the ledger's invariants:
// each transfer of made once and no other, the accounts summing to 0 in
// both, none with a floor below 0, the outboxes empty.
func (p *pipeline) waitFunds(t *testing.T, s *funds.Store, made []seckill.Movement, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	want := map[string]bool{}
	for _, m := range made {
		for _, tr := range m.Transfers {
			want[tr.ID] = true
		}
	}
	var ledger, redis map[seckill.FundsAccount]int64
	servertest.WaitFor(t, d, fmt.Sprintf("the ledger to hold %d transfers and Redis to agree with it", len(want)), func() (bool, string) {
		var n int
		if err := p.DB.Get(&n, "SELECT COUNT(*) FROM transfers"); err != nil {
			return false, err.Error()
		}
		var err error
		if ledger, err = p.Ledger.FundsBalances(ctx); err != nil {
			return false, err.Error()
		}
		if redis, err = s.Balances(ctx); err != nil {
			return false, err.Error()
		}
		pending, err := s.Pending(ctx)
		if err != nil {
			return false, err.Error()
		}
		differ := differing(ledger, redis)
		return n >= len(want) && len(differ) == 0 && len(pending) == 0,
			fmt.Sprintf("%d transfers, %d accounts differ (%v), %d outboxes hold entries", n, len(differ), first(differ, 3), len(pending))
	})
	var ids []string
	if err := p.DB.Select(&ids, "SELECT id FROM transfers"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || !want[id] {
			t.Errorf("transfer %s in the ledger: seen before %v, made %v", id, seen[id], want[id])
		}
		seen[id] = true
	}
	if len(seen) != len(want) {
		t.Errorf("the ledger holds %d transfers, %d were made", len(seen), len(want))
	}
	for name, bs := range map[string]map[seckill.FundsAccount]int64{"ledger": ledger, "redis": redis} {
		var sum int64
		for a, n := range bs {
			sum += n
			if a.Floored() && n < 0 {
				t.Errorf("%s: %s holds %d", name, a, n)
			}
		}
		if sum != 0 {
			t.Errorf("%s: the accounts sum to %d, want 0", name, sum)
		}
	}
}

// differing lists the accounts whose balances differ (an account absent
// holds 0).
func differing(a, b map[seckill.FundsAccount]int64) []string {
	var out []string
	for k, n := range a {
		if b[k] != n {
			out = append(out, fmt.Sprintf("%s %d/%d", k, n, b[k]))
		}
	}
	for k, n := range b {
		if _, ok := a[k]; !ok && n != 0 {
			out = append(out, fmt.Sprintf("%s 0/%d", k, n))
		}
	}
	sort.Strings(out)
	return out
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// TestFundsPipelineHappyPath: 300 credits to 60 wallets and 120 charges
// of made-up orders to three merchants, concurrently; then refunds,
// voids and payouts decided on the merchants' followed balances. Once
// the pipeline drains, the ledger holds each transfer once, and every
// account's balance in Redis is its balance by the ledger; several
// movements travelled in each message.
func TestFundsPipelineHappyPath(t *testing.T) {
	eachBus(t, nil, testFundsPipelineHappyPath)
}

func testFundsPipelineHappyPath(t *testing.T, p *pipeline) {
	s := p.fundsStore()
	run(t, p.fundsRelay(s, p.broker).Run)
	p.fundsConsumer(t, p.broker, p.Ledger, s)

	made := move(t, s, credits("happy", 60, 5, 1_000), 32)
	cs := move(t, s, charges("happy", 60, 2, 1_250), 32)
	made = append(made, cs...)
	p.waitFunds(t, s, made, 30*time.Second)

	// The merchants hold what their charges' follows gave them: refunds
	// and payouts are decided on it.
	var later []seckill.Movement
	for _, c := range cs[:10] {
		later = append(later, seckill.RefundOf(c, time.Now()))
	}
	for m := int64(1); m <= 3; m++ {
		later = append(later, seckill.PayoutMovement(fmt.Sprint("payout-", m), m, 1_000, time.Now()))
	}
	made = append(made, move(t, s, later, 8)...)
	for _, c := range cs[10:13] {
		did, err := s.Cancel(context.Background(), c.Side, c.ID, time.Now())
		if err != nil || !did {
			t.Fatalf("void of %s: made %v, %v", c.ID, did, err)
		}
		made = append(made, seckill.Reverse(c, time.Now()))
	}
	p.waitFunds(t, s, made, 30*time.Second)

	published := p.counter(t, "seckill_funds_relay_published_total")
	messages := p.labelled(t, "seckill_messages_published_total", bus.Funds)
	if int(published) != len(made) || messages >= published {
		t.Errorf("%v movements published in %v messages; want %d in fewer", published, messages, len(made))
	}
	if n := p.counter(t, "seckill_funds_movements_persisted_total"); int(n) < len(made) {
		t.Errorf("%v movements counted persisted, %d made", n, len(made))
	}
}

// TestFundsDeadRelayClaimed: a relay reads the movements of every group,
// publishes half of them, and dies without acknowledging any. The sweep
// of a live relay (which heard of none of them) finds them, claims them
// after ClaimIdle and publishes them again; each transfer reaches the
// ledger once and each share is followed once.
func TestFundsDeadRelayClaimed(t *testing.T) {
	eachBus(t, nil, testFundsDeadRelayClaimed)
}

func testFundsDeadRelayClaimed(t *testing.T, p *pipeline) {
	ctx := context.Background()
	elsewhere := p.fundsStore() // the store of the process that made them
	made := move(t, elsewhere, credits("dead", 40, 3, 700), 16)
	made = append(made, move(t, elsewhere, charges("dead", 40, 1, 900), 16)...)

	groups, err := elsewhere.Pending(ctx)
	if err != nil || len(groups) == 0 {
		t.Fatalf("pending groups %v, %v", groups, err)
	}
	read := 0
	for _, g := range groups {
		es, err := elsewhere.ReadOutbox(ctx, g, "dead-relay", rdb.OutboxNew, 1000, -1)
		if err != nil {
			t.Fatal(err)
		}
		read += len(es)
		for i, e := range es {
			if i%2 == 1 {
				continue
			}
			m, err := e.Movement()
			if err != nil {
				t.Fatal(err)
			}
			s, _ := funds.EncodeMovement(m)
			body, _ := json.Marshal([]string{s})
			if _, err := p.broker.Publish(ctx, bus.Funds, bus.Message{ID: "dead-" + e.ID, Body: body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if read != len(made) {
		t.Fatalf("the dead relay read %d entries of %d movements", read, len(made))
	}

	s := p.fundsStore()
	run(t, p.fundsRelay(s, p.broker).Run)
	p.fundsConsumer(t, p.broker, p.Ledger, s)
	p.waitFunds(t, s, made, 30*time.Second)
	if n := p.counter(t, "seckill_funds_relay_claimed_total"); int(n) != len(made) {
		t.Errorf("%v entries claimed, the dead relay held %d", n, len(made))
	}
}

// TestFundsPoisonDeadLettered: an outbox entry that does not decode
// travels alone and is dead-lettered, as are a malformed message and a
// movement the ledger refuses put on the queue; the movements around them
// reach the ledger, and the poison entries leave their outbox.
func TestFundsPoisonDeadLettered(t *testing.T) {
	eachBus(t, nil, testFundsPoisonDeadLettered)
}

func testFundsPoisonDeadLettered(t *testing.T, p *pipeline) {
	ctx := context.Background()
	s := p.fundsStore()
	run(t, p.fundsRelay(s, p.broker).Run)
	p.fundsConsumer(t, p.broker, p.Ledger, s)

	made := move(t, s, credits("poison", 30, 2, 500), 16)
	g := s.Group(seckill.WalletOf("poison-user-0"))
	for _, e := range []string{
		"garbage",
		// Well-formed, but moving nothing: Validate refuses it.
		"poison.m|wallet:poison-user-0\npoison.t|credit|0|platform|wallet:poison-user-0||||1700000000000",
	} {
		if err := p.Redis.XAdd(ctx, &redis.XAddArgs{Stream: p.Keys.Funds(g).Outbox(), Values: map[string]any{"e": e}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A message that does not decode, and a movement the ledger refuses (an
	// order id longer than its column), put on the queue directly.
	tooLong := seckill.Order{ID: strings.Repeat("o", 60), UserID: "poison-user-1", Qty: 1, AmountCents: 100}
	refused, _ := seckill.ChargeMovement(tooLong, 1, 250, time.Now())
	encoded, err := funds.EncodeMovement(refused)
	if err != nil {
		t.Fatal(err)
	}
	refusedBody, _ := json.Marshal([]string{encoded})
	for _, body := range [][]byte{[]byte(`["not|a|movement"]`), refusedBody} {
		if _, err := p.broker.Publish(ctx, bus.Funds, bus.Message{ID: "raw", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	made = append(made, move(t, s, credits("poison", 30, 1, 300), 16)...)
	made = append(made, move(t, s, charges("poison", 30, 1, 700), 16)...)

	p.waitFunds(t, s, made, 30*time.Second)
	servertest.WaitFor(t, 30*time.Second, "the poison in the dead-letter queue", func() (bool, string) {
		n, err := p.broker.Depth(ctx, bus.Dead)
		return err == nil && n == 4, fmt.Sprint(n, err)
	})
	if n := p.labelled(t, "seckill_worker_dead_lettered_total", bus.Funds); n != 4 {
		t.Errorf("%v funds messages dead-lettered, want 4", n)
	}
}

// TestFundsBrokerOutage cuts RabbitMQ off from the funds relay and
// consumer for a few seconds while movements are made: they wait in the
// outboxes, then drain, each once.
func TestFundsBrokerOutage(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	px := proxy(t, "rabbitmq", "127.0.0.1:5672")
	cfg := p.Config
	cfg.AMQP.URL = viaProxy(cfg.AMQP.URL, "127.0.0.1:5672", px)
	relayBroker, workerBroker := servertest.NewBroker(cfg), servertest.NewBroker(cfg)
	t.Cleanup(func() { relayBroker.Close(); workerBroker.Close() })
	s := p.fundsStore()
	run(t, p.fundsRelay(s, relayBroker).Run)
	p.fundsConsumer(t, workerBroker, p.Ledger, s)

	made := move(t, s, credits("outage", 50, 2, 1_000), 16)
	px.Stop()
	outage := time.Now()
	made = append(made, move(t, s, charges("outage", 50, 1, 600), 16)...)
	made = append(made, move(t, s, credits("outage", 50, 1, 200), 16)...)
	time.Sleep(5*time.Second - time.Since(outage)) // the length of the outage, not a wait for a condition
	// An entry leaves its outbox only once the broker confirmed it.
	if gs, err := s.Pending(context.Background()); err != nil || len(gs) == 0 {
		t.Fatalf("with the broker away, %d outboxes hold entries (%v)", len(gs), err)
	}
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	made = append(made, move(t, s, credits("outage", 50, 1, 100), 16)...)
	p.waitFunds(t, s, made, 60*time.Second)
}

// TestFundsWorkerKilledMidBatch runs `seckill worker` as a process, kills
// it with SIGKILL while it writes movements, and starts another: each
// transfer reaches the ledger once and each share is followed once.
func TestFundsWorkerKilledMidBatch(t *testing.T) {
	t.Parallel()
	bin := servertest.Binary(t)
	p := newPipeline(t, "SECKILL_WORKER_BATCH=50")
	s := p.fundsStore()
	run(t, p.fundsRelay(s, p.broker).Run)
	made := move(t, s, credits("kill", 200, 10, 1_000), 64)
	made = append(made, move(t, s, charges("kill", 200, 5, 900), 64)...)

	first := startWorker(t, bin, p)
	servertest.WaitFor(t, 30*time.Second, "the first worker to be mid-stream", func() (bool, string) {
		var n int
		_ = p.DB.Get(&n, "SELECT COUNT(*) FROM transfers")
		return n >= 500, fmt.Sprint(n, " transfers")
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	var atKill int
	_ = p.DB.Get(&atKill, "SELECT COUNT(*) FROM transfers")
	t.Logf("killed the worker with %d transfers persisted", atKill)
	startWorker(t, bin, p)
	p.waitFunds(t, s, made, 60*time.Second)
	if n, err := p.broker.Depth(context.Background(), bus.Dead); err != nil || n != 0 {
		t.Errorf("%d messages dead-lettered by the kill (%v)", n, err)
	}
}

// TestFundsReconcile: after a burst of movements the funds reconcile to
// the cent; a balance tampered with in Redis is drift, and so is a paid
// order without its charge; the repair writes the ledger's sums back,
// also after Redis lost every balance.
func TestFundsReconcile(t *testing.T) {
	p := newPipeline(t)
	s := p.fundsStore()
	run(t, p.fundsRelay(s, p.broker).Run)
	p.fundsConsumer(t, p.broker, p.Ledger, s)
	ctx := context.Background()
	made := move(t, s, credits("rec", 20, 3, 700), 16)
	made = append(made, move(t, s, charges("rec", 20, 1, 900), 16)...)
	p.waitFunds(t, s, made, 30*time.Second)

	fr := worker.NewFundsReconciler(s, p.Ledger, p.broker, nil)
	rep, err := fr.Wait(ctx, 10*time.Second)
	if err != nil || len(rep.Drift) != 0 || rep.InFlight || rep.RedisSum != 0 || rep.LedgerSum != 0 || rep.Accounts < 21 {
		t.Fatalf("after the burst: %+v %v", rep, err)
	}

	// A cent appears in Redis from nowhere.
	wallet := seckill.WalletOf("rec-user-3")
	p.Redis.HIncrBy(ctx, p.Keys.Funds(s.Group(wallet)).Balances(), string(wallet), 1)
	if rep, err := fr.Check(ctx); err != nil || len(rep.Drift) != 2 { // the account, and the sum
		t.Errorf("a tampered balance: %+v %v", rep, err)
	}
	if err := fr.Repair(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if rep, err := fr.Check(ctx); err != nil || len(rep.Drift) != 0 {
		t.Errorf("after the repair: %+v %v", rep, err)
	}

	// Redis loses every balance: the repair brings each back.
	servertest.DeleteKeys(t, p.Redis, p.Config.Redis.Prefix+":funds:*")
	if rep, _ := fr.Check(ctx); len(rep.Drift) == 0 {
		t.Error("no drift after Redis lost the balances")
	}
	if err := fr.Repair(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Balance(ctx, wallet); err != nil || b != 3*700-900 {
		t.Errorf("%s holds %d after the repair (%v), want %d", wallet, b, err, 3*700-900)
	}
	if rep, err := fr.Check(ctx); err != nil || len(rep.Drift) != 0 {
		t.Errorf("after the repair from the ledger: %+v %v", rep, err)
	}

	// A paid order whose charge never reached the ledger.
	sale := servertest.MustSale(t, p.srv, servertest.SaleSpec{Total: 5, PriceCents: 10})
	e := seckill.Event{OrderID: seckill.NewOrderID(sale.ID), SaleID: sale.ID, UserID: "rec-ghost", Qty: 1, PriceCents: 10,
		RequestID: "rec-ghost-request", At: time.Now().UnixMilli()}
	if err := p.Ledger.InsertOrders(ctx, []seckill.Order{e.Order(time.Hour, time.Now())}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.SetPaid(ctx, e.OrderID, seckill.ChargeID(e.OrderID), time.Now()); err != nil {
		t.Fatal(err)
	}
	if rep, err := fr.Check(ctx); err != nil || len(rep.Drift) != 1 || !strings.Contains(rep.Drift[0], e.OrderID) {
		t.Errorf("a paid order without its charge: %+v %v", rep, err)
	}
}
