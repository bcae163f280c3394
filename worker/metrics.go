package worker

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the relay's and the worker's Prometheus series.
type Metrics struct {
	relayPublished prometheus.Counter
	relayClaimed   prometheus.Counter
	relayBatch     prometheus.Histogram
	persisted      prometheus.Counter
	batchSize      prometheus.Histogram
	commit         prometheus.Histogram
	deadLettered   *prometheus.CounterVec
	deadLetters    prometheus.Gauge
	dbRetries      prometheus.Counter
	cancelled      prometheus.Counter
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
	}
	reg.MustRegister(m.relayPublished, m.relayClaimed, m.relayBatch, m.persisted, m.batchSize, m.commit,
		m.deadLettered, m.deadLetters, m.dbRetries, m.cancelled)
	return m
}

// Persisted is how many order events the worker has committed so far,
// duplicates included: a cheap progress reading for benchmarks.
func (m *Metrics) Persisted() int {
	var d dto.Metric
	_ = m.persisted.Write(&d)
	return int(d.GetCounter().GetValue())
}
