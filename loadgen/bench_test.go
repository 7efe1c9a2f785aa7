package loadgen

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/smg-go/smg/loadgen/loadgentest"
	"github.com/valyala/fastjson"
)

// BenchmarkClosedLoopRaw measures the whole load generator (driver, fasthttp client,
// parsing, recording) against the fake engine over loopback TCP in one process: b.N raw
// requests from 16 clients. It reports req/s; ns/op is wall time per request with both
// sides sharing the CPUs. For the two-process figure see docs/benchmarks-loadgen.md.
func BenchmarkClosedLoopRaw(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			srv, err := loadgentest.Start(loadgentest.Options{WorkerID: "w"})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			cfg := DefaultConfig()
			cfg.BaseURL, cfg.Model, cfg.Workload, cfg.Stream = srv.BaseURL, "m", WorkloadRaw, stream
			cfg.MaxConcurrency, cfg.NumRequests, cfg.Warmup = 16, b.N, 64
			b.ReportAllocs()
			b.ResetTimer()
			res, err := Run(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			if res.Completed != int64(b.N) {
				b.Fatalf("completed %d of %d: %v", res.Completed, b.N, res.StatusCounts)
			}
			b.ReportMetric(res.RequestThroughput, "req/s")
		})
	}
}

func BenchmarkSSEReader(b *testing.B) {
	var stream strings.Builder
	for i := range 64 {
		fmt.Fprintf(&stream, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
	}
	stream.WriteString("data: [DONE]\n\n")
	input := stream.String()
	var r sseReader
	var p fastjson.Parser
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		r.reset(strings.NewReader(input))
		for {
			data, err := r.next()
			if err != nil {
				break
			}
			if string(data) != "[DONE]" {
				if _, err := parsePayload(&p, EndpointChat, data); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/65, "ns/event")
}
