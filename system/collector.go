package system

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/inventory"
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
	_ = inventory.EachMaster(ctx, c.s.Redis, func(ctx context.Context, r *redis.Client) error {
		info, err := r.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(c.redisCPU, prometheus.CounterValue,
			infoFloat(info, "used_cpu_user")+infoFloat(info, "used_cpu_sys"), r.Options().Addr)
		return nil
	})
}

// infoFloat reads a number field of an INFO reply.
func infoFloat(info, field string) float64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
