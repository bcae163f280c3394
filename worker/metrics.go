package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill/seckill/bus"
)

// Metrics are the relay's and the worker's Prometheus series.
type Metrics struct {
	relayPublished prometheus.Counter
	relayClaimed   prometheus.Counter
	relayBatch     prometheus.Histogram
	messages       *prometheus.CounterVec
	persisted      prometheus.Counter
	batchSize      prometheus.Histogram
	commit         prometheus.Histogram
	deadLettered   *prometheus.CounterVec
	deadLetters    prometheus.Gauge
	dbRetries      prometheus.Counter
	cancelled      prometheus.Counter
	// What the alerts watch (configs/prometheus/alerts.yml).
	outboxAge  prometheus.Gauge
	ledgerLag  prometheus.Histogram
	drifts     prometheus.Counter
	reconciled prometheus.Counter
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		relayPublished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_relay_published_total", Help: "Order events confirmed by RabbitMQ and removed from the outbox.",
		}),
		relayClaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_relay_claimed_total", Help: "Outbox events taken over from a relay that stopped confirming them.",
		}),
		relayBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_relay_batch_seconds", Help: "Time to publish one outbox batch and get its confirms.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_messages_published_total",
			Help: "Messages confirmed by the broker, by queue: orders from the relay, timeouts the worker schedules for the orders it commits (RabbitMQ's work goes mostly with these, not with the orders in them).",
		}, []string{"queue"}),
		persisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_worker_orders_persisted_total", Help: "Order events committed to the ledger (duplicates included).",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_worker_batch_size", Help: "Orders written per MySQL transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_worker_commit_seconds", Help: "Time to write and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_worker_dead_lettered_total", Help: "Messages the worker judged unprocessable and sent to the dead-letter queue, by queue.",
		}, []string{"queue"}),
		deadLetters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_dead_letters", Help: "Messages in the dead-letter queue (read every 10 s); see seckill deadletters.",
		}),
		dbRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_worker_db_retries_total", Help: "Ledger writes retried because the ledger was unavailable or failed.",
		}),
		cancelled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_worker_orders_cancelled_total", Help: "Unpaid orders cancelled at the end of their payment window.",
		}),
		outboxAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_outbox_oldest_age_seconds", Help: "Age of the oldest order event not yet relayed to RabbitMQ, over the live sales' outboxes (0: none waits); read by each relay every few seconds.",
		}),
		ledgerLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_ledger_lag_seconds", Help: "Time from an order's acceptance in Redis to its commit in the ledger.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 15),
		}),
		drifts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_drifts_total", Help: "Sales the reconciler found disagreeing between Redis and the ledger (each then repaired from the ledger).",
		}),
		reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_reconcile_checks_total", Help: "Sales the reconciler checked.",
		}),
	}
	reg.MustRegister(m.relayPublished, m.relayClaimed, m.relayBatch, m.messages, m.persisted, m.batchSize, m.commit,
		m.deadLettered, m.deadLetters, m.dbRetries, m.cancelled, m.outboxAge, m.ledgerLag, m.drifts, m.reconciled)
	// A labelled series exists from its first event on: export each queue
	// at 0 from the start, so that a panel over a healthy system reads 0,
	// not "No data".
	for _, q := range []string{bus.Orders, bus.Timeouts} {
		m.messages.WithLabelValues(q)
		m.deadLettered.WithLabelValues(q)
	}
	return m
}

// Persisted is how many order events the worker has committed so far,
// duplicates included: a cheap progress reading for benchmarks.
func (m *Metrics) Persisted() int {
	var d dto.Metric
	_ = m.persisted.Write(&d)
	return int(d.GetCounter().GetValue())
}
