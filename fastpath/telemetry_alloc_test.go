//go:build !race

package fastpath

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
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
