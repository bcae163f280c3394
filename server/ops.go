package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill/seckill"
)

// readyz answers 200 when every check passes, else 503 naming the failing
// services. Both carry the dead-letter count when there is a bus to ask:
// dead letters do not make a process unready, but an operator should see
// them.
func readyz(checks map[string]func(context.Context) error, dead func(context.Context) (int, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
		defer cancel()
		failing := map[string]string{}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				failing[name] = err.Error()
			}
		}
		body := gin.H{"status": "ready"}
		status := http.StatusOK
		if len(failing) > 0 {
			status = http.StatusServiceUnavailable
			body = gin.H{
				"status":  "unavailable",
				"error":   errorDetail{Code: seckill.CodeUnavailable, Message: "Some backing services do not answer."},
				"failing": failing,
			}
		}
		if dead != nil {
			if n, err := dead(ctx); err == nil {
				body["dead_letters"] = n
			}
		}
		c.JSON(status, body)
	}
}

func healthz(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

// OpsHandler serves the operations listener: /healthz, /readyz, /metrics
// and the Go profiler under /debug/pprof/. It belongs on an address that
// only operators reach (ops_addr, worker_metrics_addr), never the public
// one.
func OpsHandler(reg *prometheus.Registry, ready map[string]func(context.Context) error) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/healthz", healthz)
	e.GET("/readyz", readyz(ready, nil))
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	e.GET("/debug/pprof/*name", func(c *gin.Context) {
		switch c.Param("name") {
		case "/cmdline":
			pprof.Cmdline(c.Writer, c.Request)
		case "/profile":
			pprof.Profile(c.Writer, c.Request)
		case "/symbol":
			pprof.Symbol(c.Writer, c.Request)
		case "/trace":
			pprof.Trace(c.Writer, c.Request)
		default:
			pprof.Index(c.Writer, c.Request)
		}
	})
	return e
}
