package bench

import (
	"math"
	"strings"
	"testing"
)

func TestGRPCMetrics(t *testing.T) {
	r := &GRPCResult{PromptBytes: 4096, StreamTokens: 128, Rows: []GRPCRow{
		{Key: "direct-grpc", TTFTP50MS: 0.2, TTFTP99MS: 0.5},
		{Key: "direct-http", TTFTP50MS: 0.1, TTFTP99MS: 0.3},
		{Key: "smg-grpc", TTFTP50MS: 0.9, TTFTP99MS: 2.5, CPUMSPerRequest: 6},
		{Key: "smg-http", TTFTP50MS: 0.3, TTFTP99MS: 1, CPUMSPerRequest: 4},
	}}
	m := map[string]float64{}
	r.metrics(m)
	for name, want := range map[string]float64{
		"grpc.added_ttft_p50_ms":                0.7,
		"grpc.added_ttft_p99_ms":                2,
		"grpc.ttft_p50_ratio.smg-grpc/smg-http": 3,
		"grpc.cpu_ratio.smg-grpc/smg-http":      1.5,
		"grpc.cpu_ms_per_request.smg-grpc":      6,
	} {
		if got, ok := m[name]; !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if tab := r.Table(); !strings.Contains(tab, "| smg-grpc | 0.900 | 2.500 | 6.00 |") || !strings.Contains(tab, "TTFT p50 0.700 ms") {
		t.Errorf("table:\n%s", tab)
	}
	if err := (GRPCConfig{}).Validate(); err == nil {
		t.Error("the zero config validated")
	}
}
