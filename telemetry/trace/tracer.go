package trace

import (
	"context"
	"os"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/traceparent"
	"github.com/smg-go/smg/telemetry"
)

var _ telemetry.Exporter = (*Tracer)(nil)

// Tracer turns finished records into spans and exports them. Export is for one goroutine
// at a time (the telemetry sink's); a nil or disabled Tracer exports nothing.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
}

// New returns a Tracer exporting to cfg.Endpoint. It does not wait for the receiver: the
// connection is made, and remade, in the background.
func New(cfg Config) (*Tracer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enable {
		return nil, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithTimeout(cfg.ExportTimeout)}
	if !transportFromEnvironment(os.Getenv) {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, err
	}
	return newTracer(cfg, exp), nil
}

// transportEnvironment are the OpenTelemetry variables that choose the exporter's transport
// security: with any of them set the exporter follows them (TLS with the given CA, client
// certificate, or plaintext when INSECURE is true), else it speaks plaintext, as the spec
// product's --otlp-traces-endpoint does. Headers (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_TRACES_HEADERS) the exporter reads by itself in any case.
var transportEnvironment = []string{
	"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	"OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
}

// transportFromEnvironment reports whether getenv sets one of transportEnvironment.
func transportFromEnvironment(getenv func(string) string) bool {
	for _, name := range transportEnvironment {
		if getenv(name) != "" {
			return true
		}
	}
	return false
}

// newTracer returns a Tracer batching its spans to exp.
func newTracer(cfg Config, exp sdktrace.SpanExporter) *Tracer {
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp,
			sdktrace.WithBatchTimeout(cfg.BatchTimeout),
			sdktrace.WithMaxExportBatchSize(cfg.BatchSize),
			sdktrace.WithMaxQueueSize(cfg.QueueSize),
			sdktrace.WithExportTimeout(cfg.ExportTimeout)),
		sdktrace.WithIDGenerator(recordIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()), // the data plane sampled: only sampled records reach Export
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))),
	)
	return &Tracer{
		provider: provider,
		tracer:   provider.Tracer("github.com/smg-go/smg"),
	}
}

// Shutdown sends the spans still queued, until ctx ends, and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Export queues the spans of r if its trace is sampled. It does not keep r.
func (t *Tracer) Export(r *telemetry.Record) {
	if t == nil || !r.Sampled || r.TraceID == ([16]byte{}) || r.SpanID == ([8]byte{}) || r.Start == 0 || r.End == 0 {
		return
	}
	ctx := context.WithValue(context.Background(), recordKey{}, r)
	if r.ParentSpanID != ([8]byte{}) {
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: r.TraceID, SpanID: r.ParentSpanID, TraceFlags: oteltrace.FlagsSampled, Remote: true,
		}))
	}
	_, span := t.tracer.Start(ctx, "smg.request",
		oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithTimestamp(clock.TimeOf(r.Start)),
		oteltrace.WithAttributes(requestAttributes(r)...))
	// The children are started from a context without the record: they get ids of their own.
	child := oteltrace.ContextWithSpan(context.Background(), span)
	if r.Admitted != 0 {
		t.interval(child, "smg.admission", r.Start, r.Admitted)
	}
	if r.Picked != 0 {
		from := r.Admitted
		if from == 0 {
			from = r.Start
		}
		t.interval(child, "smg.pick", from, r.Picked, pickAttributes(r)...)
	}
	t.exportTries(child, r)
	if r.FirstToken != 0 {
		span.AddEvent("first_token", oteltrace.WithTimestamp(clock.TimeOf(r.FirstToken)))
	}
	if r.Status >= 500 {
		cause := r.Cause
		if cause == "" {
			cause = r.ErrorCode
		}
		span.SetStatus(codes.Error, cause)
	}
	span.End(oteltrace.WithTimestamp(clock.TimeOf(r.End)))
}

// pickAttributes are the pick span's: the policy, the worker it picked first and, for a
// prefix-matching policy, the longest cached prefix it found.
func pickAttributes(r *telemetry.Record) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 5)
	if r.Policy != "" {
		attrs = append(attrs, attribute.String("smg.policy", r.Policy))
	}
	if w := r.Tries[0].Worker; w != nil {
		attrs = append(attrs, attribute.String("smg.worker", w.URL))
	}
	if r.CacheInput > 0 {
		attrs = append(attrs, attribute.Int("smg.cache.matched", int(r.CacheMatched)),
			attribute.Int("smg.cache.input", int(r.CacheInput)),
			attribute.Float64("smg.cache.match_ratio", float64(r.CacheMatched)/float64(r.CacheInput)))
	}
	return attrs
}

// exportTries exports a child span of ctx's span per try the record describes, from the
// request leaving for the worker to the try's end: its worker, its retry number (0 for the
// first try), the worker's status or the failure, and the pause taken after it.
func (t *Tracer) exportTries(ctx context.Context, r *telemetry.Record) {
	for i := range min(int(r.Attempts), len(r.Tries)) {
		try := &r.Tries[i]
		if try.Worker == nil || try.Sent == 0 {
			continue
		}
		end := try.Ended
		if end == 0 {
			end = r.End
		}
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs, attribute.String("smg.worker", try.Worker.URL), attribute.Int("smg.retry", i))
		if try.Status != 0 {
			attrs = append(attrs, attribute.Int("http.response.status_code", int(try.Status)))
		}
		if f := try.Failure.String(); f != "" {
			attrs = append(attrs, attribute.String("error.type", f))
		}
		if try.Backoff > 0 {
			attrs = append(attrs, attribute.Float64("smg.backoff_ms", float64(try.Backoff)/1e6))
		}
		_, s := t.tracer.Start(ctx, "smg.attempt", oteltrace.WithTimestamp(clock.TimeOf(try.Sent)), oteltrace.WithAttributes(attrs...))
		switch {
		case try.Failure != telemetry.TryAnswered:
			s.SetStatus(codes.Error, "worker "+try.Worker.URL+": "+try.Failure.String())
		case try.Status >= 500:
			s.SetStatus(codes.Error, "worker "+try.Worker.URL+" answered "+strconv.Itoa(int(try.Status)))
		}
		s.End(oteltrace.WithTimestamp(clock.TimeOf(end)))
	}
}

// interval exports a child span of ctx's span from from to to.
func (t *Tracer) interval(ctx context.Context, name string, from, to int64, attrs ...attribute.KeyValue) {
	_, s := t.tracer.Start(ctx, name, oteltrace.WithTimestamp(clock.TimeOf(from)), oteltrace.WithAttributes(attrs...))
	s.End(oteltrace.WithTimestamp(clock.TimeOf(to)))
}

// requestAttributes are the attributes of the request span, in OpenTelemetry's semantic
// conventions where they have a name (HTTP, GenAI), smg.* where not.
func requestAttributes(r *telemetry.Record) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		attribute.String("http.route", r.Route),
		attribute.Int("http.response.status_code", r.Status),
		attribute.Int("smg.attempts", int(r.Attempts)),
		attribute.Bool("smg.stream", r.Stream))
	if id := r.ID(); id != "" {
		attrs = append(attrs, attribute.String("smg.request_id", id))
	}
	if r.Model != "" {
		attrs = append(attrs, attribute.String("gen_ai.request.model", r.Model))
	}
	if r.Worker != nil {
		attrs = append(attrs, attribute.String("smg.worker", r.Worker.URL))
	}
	if r.RetriesExhausted {
		attrs = append(attrs, attribute.Bool("smg.retries_exhausted", true))
	}
	if r.ErrorCode != "" {
		attrs = append(attrs, attribute.String("error.type", r.ErrorCode))
	}
	if r.PD {
		attrs = append(attrs, attribute.Bool("smg.pd", true))
	}
	if r.GRPC {
		attrs = append(attrs, attribute.Bool("smg.grpc", true))
	}
	for _, tok := range []struct {
		key string
		n   int32
	}{{"gen_ai.usage.input_tokens", r.PromptTokens}, {"gen_ai.usage.output_tokens", r.CompletionTokens}, {"smg.usage.cached_tokens", r.CachedTokens}} {
		if tok.n >= 0 {
			attrs = append(attrs, attribute.Int(tok.key, int(tok.n)))
		}
	}
	return attrs
}

// recordKey carries the record whose request span is being started (recordIDs).
type recordKey struct{}

// recordIDs gives the request span the record's ids (the span the workers saw as their
// parent, in the client's trace or the one the gateway started) and every other span
// random ones.
type recordIDs struct{}

func (recordIDs) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	if r, ok := ctx.Value(recordKey{}).(*telemetry.Record); ok {
		return r.TraceID, r.SpanID
	}
	return traceparent.NewTraceID(), traceparent.NewSpanID()
}

func (recordIDs) NewSpanID(ctx context.Context, _ oteltrace.TraceID) oteltrace.SpanID {
	if r, ok := ctx.Value(recordKey{}).(*telemetry.Record); ok {
		return r.SpanID
	}
	return traceparent.NewSpanID()
}
