package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/rabbitmq"
	"github.com/seckill/seckill/internal/wait"
	"github.com/seckill/seckill/system"
	"github.com/seckill/seckill/worker"
)

// pipelineCase measures orders per second from the outbox to committed
// MySQL rows, through the real relay and worker, against (1) a naive
// consumer that inserts and acknowledges one message at a time and (2) raw
// multi-row INSERTs of the same rows with no queue at all.
func pipelineCase(ctx context.Context, e *Env, o Options) (Table, error) {
	n := o.Orders
	cfg := e.Config
	srv, err := e.server(cfg, nil)
	if err != nil {
		return Table{}, err
	}
	var sales [3]seckill.Sale
	for i := range sales {
		if sales[i], err = e.sale(ctx, srv, int64(n), int64(n), 100); err != nil {
			return Table{}, err
		}
	}
	pipeSale, naiveSale, rawSale := sales[0], sales[1], sales[2]

	// (2) Raw multi-row INSERTs, in transactions of the worker's batch size.
	raw := events(rawSale.ID, n)
	start := time.Now()
	for i := 0; i < n; i += cfg.Orders.WorkerBatch {
		chunk := ordersOf(raw[i:min(i+cfg.Orders.WorkerBatch, n)], cfg.Orders.PaymentWindow)
		if err := e.Ledger.InsertOrders(ctx, chunk); err != nil {
			return Table{}, err
		}
	}
	rawRate := float64(n) / time.Since(start).Seconds()

	// The pipeline: fill the outbox with n accepted buys (not timed), then
	// time the relay and the worker until the last row is committed.
	for i := 0; i < n; i += 256 {
		reqs := make([]seckill.Buy, 0, 256)
		for j := i; j < min(i+256, n); j++ {
			u := fmt.Sprintf("user-%07d", j)
			reqs = append(reqs, seckill.Buy{UserID: u, Qty: 1, RequestID: "req-" + u, OrderID: seckill.NewOrderID(pipeSale.ID)})
		}
		if _, err := e.Inv.Reserve(ctx, pipeSale.ID, reqs); err != nil {
			return Table{}, err
		}
	}
	reg := prometheus.NewRegistry()
	shared, om := worker.NewConsumerMetrics(reg), worker.NewOrderMetrics(reg)
	rc := system.RelayConfig(cfg)
	rc.Poll = 50 * time.Millisecond
	relay := worker.NewRelay(e.Inv, e.Ledger, e.Broker, worker.NewRelayMetrics(reg), rc)
	oc := worker.NewOrderConsumer(e.Broker, e.Ledger, e.Funds, om, shared, system.OrderConsumerConfig(cfg))
	tc := worker.NewTimeoutConsumer(e.Broker, e.Ledger, e.Inv, e.Funds, worker.NewTimeoutMetrics(reg), shared, system.TimeoutConsumerConfig(cfg))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 3)
	start = time.Now()
	go func() { relay.Run(rctx); done <- struct{}{} }()
	go func() { oc.Run(rctx); done <- struct{}{} }()
	go func() { tc.Run(rctx); done <- struct{}{} }()
	err = waitPersisted(ctx, om, n, 10*time.Minute)
	pipeTime := time.Since(start)
	if err == nil {
		err = checkRows(ctx, e, pipeSale.ID, n)
	}
	stop()
	<-done
	<-done
	<-done
	if err != nil {
		return Table{}, err
	}
	pipeRate := float64(n) / pipeTime.Seconds()

	// (1) The naive consumer, on a queue filled beforehand (not timed). It
	// is slow, so it runs for a bounded time and its rate is what counts.
	naive := events(naiveSale.ID, n)
	naiveDone, naiveTime, err := naiveConsume(ctx, e, naive, o.Duration)
	if err != nil {
		return Table{}, err
	}
	if naiveDone == 0 {
		return Table{}, fmt.Errorf("the naive consumer wrote nothing in %s", naiveTime)
	}
	naiveRate := float64(naiveDone) / naiveTime.Seconds()

	return Table{
		Title:  fmt.Sprintf("Pipeline: outbox → RabbitMQ → worker → MySQL, %d orders", n),
		Header: []string{"contender", "orders", "seconds", "orders/s", "× naive", "× raw INSERT"},
		Rows: [][]string{
			{"naive consumer (insert + ack one message at a time)", fmt.Sprint(naiveDone), f2(naiveTime.Seconds()), f0(naiveRate), "1.00", f2(ratio(naiveRate, rawRate))},
			{"relay + batching worker (this system)", fmt.Sprint(n), f2(pipeTime.Seconds()), f0(pipeRate), f2(ratio(pipeRate, naiveRate)), f2(ratio(pipeRate, rawRate))},
			{"raw multi-row INSERTs, no queue", fmt.Sprint(n), f2(float64(n) / rawRate), f0(rawRate), f2(ratio(rawRate, naiveRate)), "1.00"},
		},
		Goals: []Goal{
			{What: "pipeline ≥ 20× the naive consumer", Got: ratio(pipeRate, naiveRate), Want: 20},
			{What: "pipeline ≥ 0.3 of raw INSERTs", Got: ratio(pipeRate, rawRate), Want: 0.3},
		},
		Notes: []string{
			fmt.Sprintf("worker batch %d, flush %s, prefetch %d; relay batch %d, %d events per message; the naive consumer ran for %s",
				cfg.Orders.WorkerBatch, cfg.Orders.WorkerFlush, cfg.Orders.WorkerPrefetch, cfg.Orders.RelayBatch, cfg.Orders.RelayPack, naiveTime.Round(time.Millisecond)),
		},
	}, nil
}

// events makes n distinct accepted-order events of a sale.
func events(sale int64, n int) []seckill.Event {
	now := time.Now().UnixMilli()
	out := make([]seckill.Event, n)
	for i := range out {
		u := fmt.Sprintf("user-%07d", i)
		out[i] = seckill.Event{OrderID: seckill.NewOrderID(sale), SaleID: sale, UserID: u, Qty: 1, PriceCents: 100, RequestID: "req-" + u, At: now}
	}
	return out
}

func ordersOf(evs []seckill.Event, window time.Duration) []seckill.Order {
	now := time.Now()
	out := make([]seckill.Order, len(evs))
	for i, ev := range evs {
		out[i] = ev.Order(window, now)
	}
	return out
}

// waitPersisted polls the order consumer's own counter (not MySQL, whose COUNT(*)
// would compete with the writes being measured) until n orders are in.
func waitPersisted(ctx context.Context, m *worker.OrderMetrics, n int, limit time.Duration) error {
	return wait.Until(ctx, limit, 5*time.Millisecond, func() (bool, string, error) {
		p := m.Persisted()
		return p >= n, fmt.Sprintf("only %d of %d orders persisted", p, n), nil
	})
}

// checkRows verifies that the sale has exactly n orders in MySQL.
func checkRows(ctx context.Context, e *Env, sale int64, n int) error {
	var got int
	if err := e.DB.GetContext(ctx, &got, "SELECT COUNT(*) FROM orders WHERE sale_id = ?", sale); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("pipeline: %d orders in MySQL, want %d", got, n)
	}
	return nil
}

// naiveConsume publishes evs to a queue of its own, then consumes it the
// naive way for at most d: prefetch 1, one transaction and one ack per
// message. It returns how many it wrote and how long that took.
func naiveConsume(ctx context.Context, e *Env, evs []seckill.Event, d time.Duration) (int, time.Duration, error) {
	b := rabbitmq.New(e.Config.AMQP.URL, e.Config.AMQP.Prefix+"-naive", e.Config.AMQP.QueueType)
	defer func() {
		if err := b.DeleteAll(); err != nil {
			slog.Warn("bench: deleting the naive queues", "err", err)
		}
		b.Close()
	}()
	// Only as many messages as the naive consumer can take in d (at most
	// 2,000/s here), so the fill does not dominate the run.
	fill := evs[:min(len(evs), max(100, int(d.Seconds()*2000)))]
	msgs := make([]bus.Message, len(fill))
	for i, ev := range fill {
		body, _ := json.Marshal(ev)
		msgs[i] = bus.Message{ID: ev.OrderID, Body: body}
	}
	if _, err := b.Publish(ctx, bus.Orders, msgs...); err != nil {
		return 0, 0, fmt.Errorf("naive fill: %w", err)
	}
	sub, err := b.Subscribe(ctx, bus.Orders, 1)
	if err != nil {
		return 0, 0, err
	}
	defer sub.Close()
	start := time.Now()
	done := 0
	for done < len(fill) && time.Since(start) < d {
		dl, ok := <-sub.Deliveries()
		if !ok {
			return done, time.Since(start), errors.New("naive consumer: subscription ended")
		}
		var ev seckill.Event
		if err := json.Unmarshal(dl.Body, &ev); err != nil {
			return done, time.Since(start), err
		}
		o := ordersOf([]seckill.Event{ev}, e.Config.Orders.PaymentWindow)
		if err := e.Ledger.InsertOrders(ctx, o); err != nil {
			return done, time.Since(start), err
		}
		if err := dl.Ack(); err != nil {
			return done, time.Since(start), err
		}
		done++
	}
	return done, time.Since(start), nil
}
