package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill/seckill/internal/signed"
	"github.com/seckill/seckill/internal/tracing"
	"github.com/seckill/seckill/room"
	"github.com/seckill/seckill/system/servertest"
	"github.com/seckill/seckill/tickets"
)

// BenchmarkSoldOutBuy is the server's own share of a sold-out answer (the
// most common answer of a flash sale): middleware, token check, strict
// decode, the batched idempotency lookup in Redis and the pre-encoded
// refusal, called straight into the handler by 64 goroutines, so neither
// the network nor a load generator adds noise; "ticket" is a sale that
// requires buy tickets, every buy carrying a valid one, "pass" one with a
// waiting room, every buy carrying an admission pass. `seckill bench
// --case outside` and `--case room` measure the whole request from
// outside.
func BenchmarkSoldOutBuy(b *testing.B) {
	env := servertest.New(b)
	srv := env.Server(b, nil)
	h := srv.Handler()
	key, passKey := tickets.Tickets.Key(servertest.JWTSecret), room.Passes.Key(servertest.JWTSecret)
	for _, kind := range []string{"plain", "ticket", "pass"} {
		sale := servertest.MustSale(b, srv, servertest.SaleSpec{Total: 1, Limit: 1, RequireTicket: kind == "ticket",
			WaitingRoom: kind == "pass", AdmitPerSecond: 100_000})
		tokens := make([]string, 1000)
		extra := make([]string, len(tokens)) // the body's ticket or pass member
		for i := range tokens {
			user := fmt.Sprint("bench-", i)
			tokens[i] = "Bearer " + servertest.Token(b, user)
			switch kind {
			case "ticket":
				extra[i] = fmt.Sprintf(`,"ticket":%q`, signed.Mint(key, user, sale.ID, time.Now().Add(time.Hour)))
			case "pass":
				extra[i] = fmt.Sprintf(`,"pass":%q`, signed.Mint(passKey, user, sale.ID, time.Now().Add(time.Hour)))
			}
		}
		path := fmt.Sprintf("/api/sales/%d/buy", sale.ID)
		var n atomic.Int64
		buy := func() int {
			i := n.Add(1)
			k := i % int64(len(tokens))
			r := httptest.NewRequest("POST", path, strings.NewReader(fmt.Sprintf(`{"qty":1,"request_id":"bench-req-%d"%s}`, i, extra[k])))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", tokens[k])
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		if code := buy(); code != 200 {
			b.Fatalf("first buy: %d", code)
		}
		b.Run(kind, func(b *testing.B) {
			b.SetParallelism(32) // 64 callers on two cores, as the outside case's 64 connections
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if code := buy(); code != 409 {
						b.Errorf("sold-out buy: %d", code)
						return
					}
				}
			})
			b.StopTimer()
			// The process's CPU per buy, Redis's not included: steadier than
			// the wall time on a shared machine.
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user+system time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBuyTracing is what tracing costs a buy with stock left (the
// request's span, the batch's Redis call span, the traceparent in the
// outbox entry): off, on with 1% of traces sampled
// (parentbased_traceidratio, the default), and on with every trace
// sampled; spans go to an exporter that drops them, so the figure is the
// server's own work. CPU per buy is the process's, Redis's not included.
func BenchmarkBuyTracing(b *testing.B) {
	env := servertest.New(b)
	srv := env.Server(b, nil)
	h := srv.Handler()
	sale := servertest.MustSale(b, srv, servertest.SaleSpec{Total: 100_000_000, Limit: 100_000_000})
	path := fmt.Sprintf("/api/sales/%d/buy", sale.ID)
	tok := "Bearer " + servertest.Token(b, "bench-tracing")
	var n atomic.Int64
	for _, c := range []struct {
		name  string
		ratio float64 // < 0: off
	}{{"off", -1}, {"sampled-1pct", 0.01}, {"sampled-all", 1}} {
		if c.ratio >= 0 {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			tracing.Use(tp)
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(32)
			cpu0 := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("POST", path, strings.NewReader(fmt.Sprintf(`{"qty":1,"request_id":"bench-tr-%d"}`, n.Add(1))))
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Authorization", tok)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Errorf("buy: %d %s", w.Code, w.Body)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		tracing.Use(nil)
	}
}
