package system

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/rdb"
)

// liveCollector reads, when Prometheus scrapes, the stock of every live
// sale (the dashboard's stock per sale) and the Redis masters' CPU time
// (its CPU per decision): one ledger query and one pipelined read a
// scrape, nothing between scrapes. Every process exports the same
// figures; the dashboard takes their max.
type liveCollector struct {
	s                      *System
	available, sold, total *prometheus.Desc
	redisCPU               *prometheus.Desc
	timeout                time.Duration
}

func newLiveCollector(s *System) *liveCollector {
	sale := []string{"sale"}
	return &liveCollector{s: s, timeout: 2 * time.Second,
		available: prometheus.NewDesc("seckill_stock_available", "Units left in a live sale (Redis, all its parts).", sale, nil),
		sold:      prometheus.NewDesc("seckill_stock_sold", "Units sold in a live sale (Redis, all its parts).", sale, nil),
		total:     prometheus.NewDesc("seckill_stock_total", "Units of a live sale.", sale, nil),
		redisCPU:  prometheus.NewDesc("seckill_redis_cpu_seconds_total", "CPU time of a Redis master (INFO cpu: used_cpu_user + used_cpu_sys).", []string{"addr"}, nil),
	}
}

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.available, c.sold, c.total, c.redisCPU} {
		ch <- d
	}
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if ids, err := c.s.Ledger.SaleIDs(ctx, time.Now().Add(-c.s.Config.Orders.Keep())); err == nil {
		stocks, err := c.s.Stock.Stocks(ctx, ids)
		if err != nil {
			slog.Debug("metrics: reading the live sales' stock", "err", err)
		}
		for id, st := range stocks {
			l := strconv.FormatInt(id, 10)
			ch <- prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, float64(max(0, st.Available)), l)
			ch <- prometheus.MustNewConstMetric(c.sold, prometheus.GaugeValue, float64(st.Sold), l)
			ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(st.Total), l)
		}
	}
	cpu, _ := rdb.CPUSeconds(ctx, c.s.Redis) // a master that did not answer is left out
	for addr, secs := range cpu {
		ch <- prometheus.MustNewConstMetric(c.redisCPU, prometheus.CounterValue, secs, addr)
	}
}
