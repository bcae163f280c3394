package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/tracing"
)

// TestStartFromAndLogs: a span continuing one traceparent is its child; one
// shared by several is the first's child, linked to the others; off,
// nothing is made and no traceparent is given; a log line of a traced
// context names its trace.
func TestStartFromAndLogs(t *testing.T) {
	ctx := context.Background()
	if _, span := tracing.Start(ctx, "off", trace.SpanKindInternal); span.SpanContext().IsValid() || tracing.Traceparent(ctx) != "" {
		t.Fatal("tracing off made a span")
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })

	a, sa := tracing.Start(ctx, "request a", trace.SpanKindServer)
	b, sb := tracing.Start(ctx, "request b", trace.SpanKindServer)
	one, s1 := tracing.StartFrom(ctx, "batch of one", trace.SpanKindClient, []string{tracing.Traceparent(a)})
	_, s2 := tracing.StartFrom(ctx, "batch of two", trace.SpanKindClient, []string{tracing.Traceparent(a), tracing.Traceparent(b), "garbage"})
	for _, s := range []trace.Span{s2, s1, sb, sa} {
		s.End()
	}
	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		spans[s.Name()] = s
	}
	if p := spans["batch of one"].Parent(); p.SpanID() != sa.SpanContext().SpanID() {
		t.Errorf("a batch of one is not the child of its request: parent %v", p)
	}
	two := spans["batch of two"]
	if two.Parent().SpanID() != sa.SpanContext().SpanID() || len(two.Links()) != 1 ||
		two.Links()[0].SpanContext.SpanID() != sb.SpanContext().SpanID() {
		t.Errorf("a batch of two: parent %v, links %v", two.Parent(), two.Links())
	}

	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler{Handler: slog.NewTextHandler(&buf, nil)})
	log.InfoContext(one, "committed")
	if want := "trace_id=" + sa.SpanContext().TraceID().String(); !strings.Contains(buf.String(), want) {
		t.Errorf("log line %q lacks %s", buf.String(), want)
	}
}
