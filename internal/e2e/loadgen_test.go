package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadgenThroughGatewayToEngineMocks runs the real loadgen against the real gateway in
// front of two engine-mode mocks and checks its JSON result: every request served, the
// per-worker split from x-smg-routed-worker-id, token counts, and a prefix-cache hit rate that
// cache-aware routing of a shared-prefix workload must produce.
func TestLoadgenThroughGatewayToEngineMocks(t *testing.T) {
	m := StartMocks(t, 2, "--mode", "engine", "--time-scale", "20", "--model", "mock-model")
	g := StartGateway(t, "--policy", "cache_aware", "--worker-urls", m.URLs[0], m.URLs[1])
	out := filepath.Join(t.TempDir(), "result.json")
	lg := Start(t, Build(t).LoadGen, "run", "--base-url", g.URL+"/v1", "--model", "mock-model",
		"--workload", "shared-prefix", "--gsp-num-groups", "4", "--gsp-prompts-per-group", "8",
		"--gsp-system-prompt-len", "512", "--gsp-question-len", "32", "--gsp-output-len", "8",
		"--max-concurrency", "4", "--seed", "7", "--progress", "off", "--output", out)
	if code := lg.Wait(120 * time.Second); code != 0 {
		t.Fatalf("loadgen exit %d:\n%s", code, lg.Output())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Completed         int64            `json:"completed"`
		Failed            int64            `json:"failed"`
		Workers           map[string]int64 `json:"workers"`
		TotalInputTokens  int64            `json:"total_input_tokens"`
		TotalOutputTokens int64            `json:"total_output_tokens"`
		CacheHitRate      float64          `json:"cache_hit_rate"`
		TTFT              struct {
			Count  int     `json:"count"`
			Median float64 `json:"median"`
		} `json:"ttft_ms"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("result JSON: %v", err)
	}
	t.Logf("loadgen result: completed=%d failed=%d workers=%v cache_hit_rate=%.2f ttft_p50=%.1fms", r.Completed, r.Failed, r.Workers, r.CacheHitRate, r.TTFT.Median)
	if r.Completed != 32 || r.Failed != 0 {
		t.Fatalf("completed %d failed %d, want 32 and 0", r.Completed, r.Failed)
	}
	var sum int64
	for w, n := range r.Workers {
		if !strings.HasPrefix(w, "http://127.0.0.1:") {
			t.Fatalf("worker key %q is not a routed worker URL", w)
		}
		sum += n
	}
	if sum != 32 || r.TotalInputTokens == 0 || r.TotalOutputTokens == 0 || r.TTFT.Count != 32 {
		t.Fatalf("result incomplete: %+v", r)
	}
	// 4 groups × 8 prompts sharing a 512-token system prompt: after the first prompt of each
	// group, cache_aware sends the group to the worker that holds its prefix.
	if r.CacheHitRate < 0.5 {
		t.Fatalf("cache hit rate %.2f with cache_aware on a shared-prefix workload", r.CacheHitRate)
	}
}
