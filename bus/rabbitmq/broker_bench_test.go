package rabbitmq_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/bus"
	"github.com/seckill/seckill/bus/rabbitmq"
)

// BenchmarkBrokerCPUPerMessage measures the broker's CPU (every beam.smp
// process on this machine: run it alone) per persistent message published
// with a confirm, delivered and acknowledged, one at a time, by size: what
// made the relay pack 500 events a message (BENCHMARKS.md, "Make an order
// cheaper").
//
//	go test -run X -bench BrokerCPUPerMessage -benchtime 1000x ./bus/rabbitmq
func BenchmarkBrokerCPUPerMessage(b *testing.B) {
	for _, size := range []int{200, 4000, 24000, 96000} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			q := open(b, rabbitmq.Classic)
			ctx := context.Background()
			sub, err := q.Subscribe(ctx, bus.Orders, 16)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			acked := make(chan error, 1)
			go func() {
				for range b.N {
					d, ok := <-sub.Deliveries()
					if !ok {
						acked <- fmt.Errorf("deliveries ended")
						return
					}
					if err := d.Ack(); err != nil {
						acked <- err
						return
					}
				}
				acked <- nil
			}()
			body := make([]byte, size)
			t0 := brokerTicks(b)
			b.ResetTimer()
			for i := range b.N {
				if _, err := q.Publish(ctx, bus.Orders, bus.Message{ID: strconv.Itoa(i), Body: body}); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-acked; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(brokerTicks(b)-t0)*1e6/ticksPerSecond/float64(b.N), "broker-µs/msg")
		})
	}
}

// ticksPerSecond is Linux's USER_HZ, the unit of /proc/<pid>/stat times.
const ticksPerSecond = 100

// brokerTicks sums the user and system time of every beam.smp process.
func brokerTicks(b *testing.B) int64 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var sum int64
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "beam.smp" {
			continue
		}
		f := strings.Fields(s[end+1:]) // state is f[0]; utime and stime are fields 14 and 15 of the line
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + st
	}
	if sum == 0 {
		b.Fatal("no beam.smp process found: is RabbitMQ running here?")
	}
	return sum
}
