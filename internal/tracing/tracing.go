// Package tracing follows one order through the system with OpenTelemetry:
// the buy request, the Redis call its batch shared, the relay's publish,
// the worker's transaction and the payment timeout, the trace context
// carried between them as W3C traceparent strings (in the outbox entry,
// in AMQP headers). Off unless configured (SECKILL_OTEL_ENDPOINT): then
// every entry point is one check of a flag, and nothing is allocated.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceparent is the W3C header a message carries its trace in.
const HeaderTraceparent = "traceparent"

var on atomic.Bool

// Enabled reports whether spans are recorded: the entry points check it
// first, so tracing off costs one load.
func Enabled() bool { return on.Load() }

var propagator = propagation.TraceContext{}

// Setup turns tracing on with an OTLP/HTTP exporter to endpoint (a URL
// such as http://collector:4318/v1/traces; the standard OTEL_* variables
// are honoured: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER and its _ARG, by default
// parentbased_traceidratio at 0.01). An empty endpoint leaves it off. The
// returned function flushes and stops it.
func Setup(ctx context.Context, endpoint, service string) (shutdown func(context.Context) error, err error) {
	if endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter for %s: %w", endpoint, err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)))
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if !samplerFromEnv() {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	Use(tp)
	slog.Info("tracing on", "endpoint", endpoint)
	return func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// Use records spans with tp (tests: an in-memory exporter), or stops
// recording them with nil.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		on.Store(false)
		return
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	on.Store(true)
}

func tracer() trace.Tracer { return otel.Tracer("github.com/seckill/seckill") }

// Start starts a span of ctx's trace. Off, it returns ctx and a span that
// records nothing.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// StartFrom starts a span whose upstream is the traceparents given: the
// child of the first (one order, one trace, and its sampling decision
// kept), linked to the others (a batch shared by several); none when none
// is given (nothing upstream was sampled).
func StartFrom(ctx context.Context, name string, kind trace.SpanKind, parents []string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() || !slices.ContainsFunc(parents, func(p string) bool { return p != "" }) {
		return ctx, trace.SpanFromContext(ctx)
	}
	var scs []trace.SpanContext
	seen := map[trace.TraceID]bool{}
	for _, p := range parents {
		if sc := Parse(p); sc.IsValid() && !seen[sc.TraceID()] {
			seen[sc.TraceID()] = true
			scs = append(scs, sc)
		}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(attrs...)}
	if len(scs) > 0 {
		ctx = trace.ContextWithRemoteSpanContext(ctx, scs[0])
		links := make([]trace.Link, 0, len(scs)-1)
		for _, sc := range scs[1:] {
			links = append(links, trace.Link{SpanContext: sc})
		}
		opts = append(opts, trace.WithLinks(links...))
	}
	return tracer().Start(ctx, name, opts...)
}

// Traceparent is the W3C traceparent of ctx's span, "" when tracing is
// off, or the span is not sampled (what continues it would not be either:
// nothing is carried for it).
func Traceparent(ctx context.Context) string {
	if !Enabled() {
		return ""
	}
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[HeaderTraceparent]
}

// Parse reads a traceparent ("" or malformed: an invalid span context).
func Parse(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{HeaderTraceparent: tp})
	return trace.SpanContextFromContext(ctx)
}

// LogHandler adds the trace and span ids of a record's context to it, so
// a log line finds its trace.
type LogHandler struct{ slog.Handler }

// Handle adds trace_id and span_id when ctx carries a recorded span.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if Enabled() {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper.
func (h LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return LogHandler{h.Handler.WithAttrs(as)}
}

// WithGroup keeps the wrapper.
func (h LogHandler) WithGroup(name string) slog.Handler { return LogHandler{h.Handler.WithGroup(name)} }

// samplerFromEnv says whether OTEL_TRACES_SAMPLER chooses the sampler
// (the SDK reads it when none is given).
func samplerFromEnv() bool { return os.Getenv("OTEL_TRACES_SAMPLER") != "" }
