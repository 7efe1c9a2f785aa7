//go:build !race

package fastpath

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/telemetry"
)

// TestTelemetryHandOverDoesNotAllocate: with a telemetry sink, a round trip, whole and
// streamed, still allocates nothing on the loops (the record is filled in the loop
// exchange and copied into the sink's queue; the sink's goroutine, whose per-model series
// exist after the first request, allocates nothing either with the access log off), and
// every request's record reached the metrics.
func TestTelemetryHandOverDoesNotAllocate(t *testing.T) {
	set := metrics.NewSet()
	g := newGateway(t, "round_robin", Config{Telemetry: newTelemetrySink(t, set)}, newUsageWorker(t, "a", new(atomic.Int32)))
	t.Run("whole", func(t *testing.T) { assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", chatBody) })
	t.Run("stream", func(t *testing.T) {
		assertRouteDoesNotAllocate(t, g, "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	})
	// assertRouteDoesNotAllocate sends 200 + 1 + 500 requests.
	const l = `router_type="http",backend_type="regular",model="m1",endpoint="chat"`
	for _, want := range []string{
		`smg_router_requests_total{` + l + `,streaming="false"} 701`,
		`smg_router_requests_total{` + l + `,streaming="true"} 701`,
		`smg_router_tokens_total{` + l + `,token_type="output"} 2804`, // 701 × 1 + 701 × 3
		`smg_router_ttft_seconds_count{` + l + `} 701`,
	} {
		testutil.Eventually(t, want, func() bool {
			var b bytes.Buffer
			set.WritePrometheus(&b)
			return strings.Contains(b.String(), want+"\n")
		})
	}
}

// BenchmarkTelemetryRoundTrip is BenchmarkProxyRoundTrip with a telemetry sink (the access
// log off), whole and streamed: against BenchmarkProxyRoundTrip in the same run, the cost of
// filling and handing over the record.
func BenchmarkTelemetryRoundTrip(b *testing.B) {
	g := newGateway(b, "round_robin", Config{Telemetry: newTelemetrySink(b, metrics.NewSet())}, newUsageWorker(b, "a", new(atomic.Int32)))
	b.Run("whole", func(b *testing.B) { benchRoundTrip(b, g) })
	b.Run("stream", func(b *testing.B) {
		benchRouteRoundTrip(b, g, "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	})
}

// BenchmarkStreamRoundTrip is BenchmarkTelemetryRoundTrip's streamed case without the sink.
func BenchmarkStreamRoundTrip(b *testing.B) {
	g := newGateway(b, "round_robin", Config{}, newUsageWorker(b, "a", new(atomic.Int32)))
	benchRouteRoundTrip(b, g, "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
}

// BenchmarkRecordHandOver is the loop's share of telemetry for one streamed request, alone:
// the record reset, the stream's pieces kept for their usage (usageStream, four events), the
// usage read from the tail, and the hand-over to a running sink.
func BenchmarkRecordHandOver(b *testing.B) {
	sink := newTelemetrySink(b, metrics.NewSet())
	pieces := bytes.SplitAfter(usageStream, []byte("\n\n"))
	var t requestTelemetry
	b.ReportAllocs()
	n, start := 0, processCPU()
	for b.Loop() {
		n++
		t.rec = telemetry.Record{Model: "m1", Route: "/v1/chat/completions", Status: 200, Stream: true, Start: 1,
			PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1}
		t.tailLen = 0
		for i, p := range pieces {
			t.streamPiece(int64(2+i), p)
		}
		t.usage(t.tail[:t.tailLen])
		t.rec.End = 10
		sink.Submit(&t.rec)
	}
	b.ReportMetric(float64(processCPU()-start)/float64(n), "cpu-ns/op") // the sink's goroutine included
	if t.rec.CompletionTokens != 3 {
		b.Fatalf("usage not read: %+v", t.rec)
	}
}
