package main

import (
	"context"
	"time"

	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/telemetry/trace"
)

// registerTraceFlags registers the tracing flags, the spec product's names: --enable-trace
// turns on the data plane's trace context (g) and the span exporter (t) together.
func registerTraceFlags(fs *cli.FlagSet, g *fastpath.TraceConfig, t *trace.Config) {
	*t = trace.DefaultConfig()
	fs.Bool("enable-trace", &t.Enable, false, "Export an OpenTelemetry span per generation request over OTLP/gRPC, joining the client's W3C traceparent; the workers get the gateway's span as their parent")
	fs.String("otlp-traces-endpoint", &t.Endpoint, trace.DefaultEndpoint, "host:port of the OTLP/gRPC trace receiver (an OpenTelemetry Collector, Jaeger, Tempo), plaintext").WithMetavar("HOST:PORT")
	fs.Float("trace-sample-ratio", &g.SampleRatio, g.SampleRatio, "Fraction of new traces sampled, decided on the trace id (a client's traceparent keeps its own sampled flag)")
}

// traceShutdown bounds the flush of the spans still queued at exit.
const traceShutdown = 5 * time.Second

// startTracer starts the span exporter when --enable-trace is set (nil otherwise); it is
// stopped, its queued spans sent, after the telemetry sink has handed it the last records.
func (g *gateway) startTracer() (*trace.Tracer, error) {
	tr, err := trace.New(g.o.trace)
	if err != nil || tr == nil {
		return nil, err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceShutdown)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			g.log.Warn("Could not send the last spans", "endpoint", g.o.trace.Endpoint, "error", err)
		}
	}
	g.onClose(stop)
	g.background = append(g.background, stop)
	g.log.Info("Exporting traces", "endpoint", g.o.trace.Endpoint, "sample_ratio", g.o.gateway.Trace.SampleRatio)
	return tr, nil
}
