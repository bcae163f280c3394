package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill/seckill/internal/tracing"
	"github.com/seckill/seckill/system/servertest"
)

// TestOneBuyIsOneTrace: with tracing on (every trace sampled, the SDK's
// in-memory exporter), one buy is one connected trace across the
// pipeline: the request, the Redis call of its batch, the relay's publish
// (through the outbox entry), the worker's commit (through the AMQP
// header) and the payment timeout (through the delayed message's header),
// each the child of the one before.
func TestOneBuyIsOneTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil); _ = tp.Shutdown(context.Background()) })

	env := servertest.New(t, "SECKILL_PAYMENT_WINDOW=2s")
	env.StartPipeline(t)
	srv := env.Server(t, nil)
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 5})
	tok := servertest.Token(t, "traced-"+servertest.Unique())
	if r := call(t, srv.Handler(), "POST", buyPath(sale.ID), buyBody(1, "traced-buy-1"), bearer(tok)); r.Status != 200 {
		t.Fatal(r)
	}
	chain := []string{"POST /api/sales/:id/buy", "redis buy.lua", "relay publish", "worker commit", "payment timeout"}
	var byName map[string]sdktrace.ReadOnlySpan
	servertest.WaitFor(t, 30*time.Second, "the order's spans through its payment timeout", func() (bool, string) {
		// The last of each name: a retried publish leaves an earlier one.
		byName = map[string]sdktrace.ReadOnlySpan{}
		for _, s := range exp.GetSpans().Snapshots() {
			byName[s.Name()] = s
		}
		var have []string
		for _, n := range chain {
			if _, ok := byName[n]; ok {
				have = append(have, n)
			}
		}
		return len(have) == len(chain), "spans: " + strings.Join(have, ", ")
	})
	root := byName[chain[0]]
	if root.Parent().IsValid() {
		t.Errorf("the request's span has a parent: %v", root.Parent())
	}
	for i, n := range chain[1:] {
		s, up := byName[n], byName[chain[i]]
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%q is in trace %s, the buy in %s", n, s.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
		if s.Parent().SpanID() != up.SpanContext().SpanID() {
			t.Errorf("%q's parent is %s, want %q (%s)", n, s.Parent().SpanID(), chain[i], up.SpanContext().SpanID())
		}
	}
	t.Logf("one buy, one trace %s: %s", root.SpanContext().TraceID(), strings.Join(chain, " → "))
}
