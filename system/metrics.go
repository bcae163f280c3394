package system

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/worker"
)

// Metrics are a process's Prometheus series: its own, and each part's.
// All are registered when the system is built, so every process exports
// them, at 0 for a part it does not run.
type Metrics struct {
	Process    *ProcessMetrics
	Relay      *worker.RelayMetrics
	Consumers  *worker.ConsumerMetrics // what the consumers share
	Orders     *worker.OrderMetrics
	Timeouts   *worker.TimeoutMetrics
	FundsRelay *worker.FundsRelayMetrics
	Funds      *worker.FundsMetrics
	Reconciler *worker.ReconcilerMetrics
}

// NewMetrics registers a process's series on reg.
func NewMetrics(reg prometheus.Registerer) Metrics {
	return Metrics{
		Process:    NewProcessMetrics(reg),
		Relay:      worker.NewRelayMetrics(reg),
		Consumers:  worker.NewConsumerMetrics(reg),
		Orders:     worker.NewOrderMetrics(reg),
		Timeouts:   worker.NewTimeoutMetrics(reg),
		FundsRelay: worker.NewFundsRelayMetrics(reg),
		Funds:      worker.NewFundsMetrics(reg),
		Reconciler: worker.NewReconcilerMetrics(reg),
	}
}

// ProcessMetrics are the series of the process as a whole, not of one of
// its parts: how the Redis it runs on keeps its data, whether it runs in
// production (the alert on volatile Redis needs both), and the buy calls
// whose WAIT for replicas timed out.
type ProcessMetrics struct {
	waitTimeouts    prometheus.Counter
	redisPersistent prometheus.Gauge
	production      prometheus.Gauge
	holds, swept    *prometheus.CounterVec
}

// NewProcessMetrics registers the series on reg.
func NewProcessMetrics(reg prometheus.Registerer) *ProcessMetrics {
	m := &ProcessMetrics{
		waitTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_redis_wait_timeouts_total", Help: "Buy calls whose WAIT for redis_wait_replicas replicas timed out (answered unavailable).",
		}),
		redisPersistent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_redis_persistent", Help: "1 when every Redis master keeps its data on disk (appendonly), 0 when one keeps it only in memory; read every minute.",
		}),
		production: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_production", Help: "1 when the process runs with env: production.",
		}),
		holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_checkout_holds_total",
			Help: "Instant checkout's wallet holds on a Redis Cluster, by what the buy's own process did with them: posted, voided, left (to the order consumer or the sweep), refused (the wallet was short).",
		}, []string{"outcome"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_checkout_holds_swept_total",
			Help: "Holds past their deadline that the worker's sweep settled (their buy's process died or never heard back), by outcome: posted, voided.",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"posted", "voided", "left", "refused"} {
		m.holds.WithLabelValues(o)
	}
	for _, o := range []string{"posted", "voided"} {
		m.swept.WithLabelValues(o)
	}
	reg.MustRegister(m.waitTimeouts, m.redisPersistent, m.production, m.holds, m.swept)
	return m
}

// Held counts a hold the checkout settled inline (or left).
func (m *ProcessMetrics) Held(outcome string) { m.holds.WithLabelValues(outcome).Inc() }

// HoldSettled counts a hold the sweep settled.
func (m *ProcessMetrics) HoldSettled(outcome string) { m.swept.WithLabelValues(outcome).Inc() }

// WaitTimedOut counts a buy call whose WAIT for replicas timed out.
func (m *ProcessMetrics) WaitTimedOut() { m.waitTimeouts.Inc() }

// Durability records whether Redis persists its data, and whether the
// process runs in production.
func (m *ProcessMetrics) Durability(persistent, production bool) {
	m.redisPersistent.Set(b2f(persistent))
	m.production.Set(b2f(production))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
