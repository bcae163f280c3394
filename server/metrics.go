package server

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill"
)

// metrics are the server's Prometheus series.
type metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	outcomes   *prometheus.CounterVec
	limiterKey *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total",
			Help: "HTTP requests by route template, method and status code.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_http_request_duration_seconds",
			Help:    "HTTP request latency by route template and method.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_buy_outcomes_total",
			Help: "Buy requests by outcome: ok or the API error code.",
		}, []string{"outcome"}),
		limiterKey: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_rate_limiter_keys",
			Help: "Keys tracked by the per-user and per-IP buy limiters.",
		}, []string{"limiter"}),
	}
	// Every outcome is exported from the start, so a dashboard reads 0
	// rather than "No data" for an outcome not seen yet. Requests are not:
	// their routes, methods and statuses multiply.
	for _, c := range seckill.Codes() {
		m.outcomes.WithLabelValues(string(c))
	}
	reg.MustRegister(m.requests, m.latency, m.outcomes, m.limiterKey)
	return m
}

// observe is the middleware that counts and times every request by its
// route template (never the raw path, which would explode the series).
func (m *metrics) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	method := c.Request.Method
	m.requests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Inc()
	m.latency.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
}
