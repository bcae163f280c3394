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
	// Money's answers: what the alerts on refused charges and forged or
	// mis-signed webhooks watch (configs/prometheus/alerts.yml).
	payments *prometheus.CounterVec
	webhooks *prometheus.CounterVec
}

// paymentOutcomes are the codes POST /api/orders/{id}/pay answers
// (sales.Service.Pay's, a backing service down, a client gone) and
// webhookOutcomes those of POST /api/payments/webhook
// (payments.Service.Webhook's and its body's): exported at 0 from the
// start. Any other code is still counted when it comes.
var (
	paymentOutcomes = []seckill.Code{seckill.CodeOK, seckill.CodeInsufficientFunds, seckill.CodeOrderCancelled,
		seckill.CodeOrderRefunded, seckill.CodeOrderNotFound, seckill.CodeUnavailable, seckill.CodeInternal, seckill.CodeClientCancelled}
	webhookOutcomes = []seckill.Code{seckill.CodeOK, seckill.CodeInvalidSignature, seckill.CodeInvalid, seckill.CodeBodyTooLarge,
		seckill.CodeRequestTimeout, seckill.CodeUnavailable, seckill.CodeInternal, seckill.CodeClientCancelled}
)

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
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payments_total",
			Help: "Order payments (POST /api/orders/{id}/pay) by outcome: ok or the API error code.",
		}, []string{"outcome"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_webhooks_total",
			Help: "Payment provider webhooks (POST /api/payments/webhook) by outcome: ok or the API error code.",
		}, []string{"outcome"}),
	}
	// Every outcome is exported from the start, so a dashboard reads 0
	// rather than "No data" for an outcome not seen yet. Requests are not:
	// their routes, methods and statuses multiply.
	for _, c := range seckill.Codes() {
		m.outcomes.WithLabelValues(string(c))
	}
	for _, c := range paymentOutcomes {
		m.payments.WithLabelValues(string(c))
	}
	for _, c := range webhookOutcomes {
		m.webhooks.WithLabelValues(string(c))
	}
	reg.MustRegister(m.requests, m.latency, m.outcomes, m.limiterKey, m.payments, m.webhooks)
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

// outcome is the code a request is answered with: ok without an error,
// else the code abort answers err with (client_cancelled for a client
// that went away).
func outcome(c *gin.Context, err error) string {
	if err == nil {
		return string(seckill.CodeOK)
	}
	return string(answerFor(c, err).code)
}
