package fastpath

import (
	"fmt"
	"math"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/traceparent"
	"github.com/smg-go/smg/telemetry"
)

// TraceConfig is the gateway's part of distributed tracing: with Enable, every generation
// request joins the client's W3C trace (traceparent, tracestate) or starts one, gets a span
// id of its own, and its workers see that span as their parent. The spans themselves are
// exported off the loops (telemetry/trace) from the request's record.
type TraceConfig struct {
	// Enable turns the trace context on (--enable-trace). Off, requests are forwarded with
	// the client's headers as sent, and nothing of this runs.
	Enable bool
	// SampleRatio is the fraction of new traces sampled (--trace-sample-ratio, default 1):
	// a request whose client sent a valid traceparent follows the client's sampled flag.
	SampleRatio float64
}

// DefaultTraceConfig returns tracing off, and when turned on every new trace sampled.
func DefaultTraceConfig() TraceConfig { return TraceConfig{SampleRatio: 1} }

// Validate reports a sample ratio outside [0, 1].
func (c *TraceConfig) Validate() error {
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("--trace-sample-ratio %v: give a fraction from 0 (no new trace sampled) to 1 (all, the default)", c.SampleRatio)
	}
	return nil
}

// headerTraceParent is the W3C Trace Context header.
const headerTraceParent = "traceparent"

// traceState is a generation request's trace context, reused from request to request:
// the trace it belongs to, the span the gateway made for it, the client's span.
type traceState struct {
	// on is set while the request carries a trace context (tracing enabled).
	on bool
	// span is the gateway's span: the trace id, its own span id, the flags sent on.
	span traceparent.Context
	// parent is the client's span id; zero when the gateway started the trace.
	parent [8]byte
	// fresh: the client's traceparent was missing or invalid, so a new trace began and the
	// client's tracestate is not sent on.
	fresh bool
	// header is span as the traceparent sent to the workers.
	header [traceparent.HeaderLen]byte
}

// begin gives the request its trace context from the client's traceparent header: the
// client's trace and sampled flag when valid, else a new trace sampled by ratio; a new
// span id either way.
func (t *traceState) begin(header []byte, ratio traceparent.Ratio) {
	t.on = true
	if c, ok := traceparent.Parse(header); ok {
		t.span.TraceID, t.span.Flags, t.parent, t.fresh = c.TraceID, c.Flags, c.SpanID, false
	} else {
		t.span.TraceID, t.span.Flags, t.parent, t.fresh = traceparent.NewTraceID(), 0, [8]byte{}, true
		if ratio.Sampled(&t.span.TraceID) {
			t.span.Flags = traceparent.FlagSampled
		}
	}
	t.span.SpanID = traceparent.NewSpanID()
	traceparent.Append(t.header[:0], &t.span)
}

// fill copies the request's trace context into its record (left zero with tracing off).
func (t *traceState) fill(r *telemetry.Record) {
	if t.on {
		r.TraceID, r.SpanID, r.ParentSpanID, r.Sampled = t.span.TraceID, t.span.SpanID, t.parent, t.span.Sampled()
	}
}

// headerString is the traceparent for a gRPC engine's metadata; "" when tracing is off.
func (t *traceState) headerString() string {
	if !t.on {
		return ""
	}
	return string(t.header[:])
}

// apply makes target send the request's trace context to the worker.
func (t *traceState) apply(target *evloop.Target) {
	if t.on {
		target.TraceParent, target.DropTraceState = t.header[:], t.fresh
	}
}
