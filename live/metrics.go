package live

import "github.com/prometheus/client_golang/prometheus"

// The reasons of seckill_ws_refused_total.
const (
	reasonHost   = "host"   // not a host of this site
	reasonOrigin = "origin" // a page of another site
	reasonPerIP  = "per_ip" // the cap on one address's connections
	reasonTotal  = "total"  // the cap on all connections
)

// refusedReasons are every reason a connection is refused for.
var refusedReasons = []string{reasonHost, reasonOrigin, reasonPerIP, reasonTotal}

// metrics are the hub's Prometheus series.
type metrics struct {
	clients prometheus.Gauge
	dropped prometheus.Counter
	refused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_ws_clients",
			Help: "Open live-stock WebSocket connections.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_ws_dropped_total",
			Help: "WebSocket clients dropped for being too slow.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ws_refused_total",
			Help: "WebSocket upgrades refused, by reason: host (not a public host), origin (cross-site), per_ip or total (connection caps).",
		}, []string{"reason"}),
	}
	// Each reason is exported from the start: a panel of refusals reads 0
	// on a healthy system, not "No data".
	for _, r := range refusedReasons {
		m.refused.WithLabelValues(r)
	}
	reg.MustRegister(m.clients, m.dropped, m.refused)
	return m
}
