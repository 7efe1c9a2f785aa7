package mockworker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestRequestLogRecordsEachRequestAndLoad: with Config.RequestLog every finished sequence
// writes one "req" line (prompt and cached tokens, the engine's state at its arrival, its TTFT
// in model time) and every /v1/loads answer one "load" line, each a JSON object.
func TestRequestLogRecordsEachRequestAndLoad(t *testing.T) {
	var log bytes.Buffer
	cfg := fastEngine(ServerGnet, DialectSGLang)
	cfg.Count, cfg.RequestLog = 2, &log
	f, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("You are a helpful assistant. ", 40) // 290 tokens, 18 full blocks
	chat := `{"messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"hi"}],"max_tokens":3}`
	u := f.URLs()[1]
	do(t, "POST", u+"/v1/chat/completions", chat)
	do(t, "POST", u+"/v1/chat/completions", chat)
	do(t, "GET", u+"/v1/loads", "")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var reqs, loads []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch m["ev"] {
		case "req":
			reqs = append(reqs, m)
		case "load":
			loads = append(loads, m)
		default:
			t.Fatalf("line %q: unknown ev", line)
		}
	}
	if len(reqs) != 2 || len(loads) != 1 {
		t.Fatalf("%d req and %d load lines, want 2 and 1:\n%s", len(reqs), len(loads), log.String())
	}
	for i, want := range []float64{0, 288} {
		r := reqs[i]
		if r["w"] != 1.0 || r["prompt"] != 291.0 || r["cached"] != want || r["out"] != 3.0 ||
			r["run"] != 0.0 || r["wait"] != 0.0 || r["aw"] != 0.0 || !(r["ttft_ms"].(float64) > 0) ||
			!(r["e2e_ms"].(float64) >= r["ttft_ms"].(float64)) || !(r["arr_us"].(float64) > 0) {
			t.Errorf("request %d: %v", i, r)
		}
	}
	if l := loads[0]; l["w"] != 1.0 || l["run"] != 0.0 || l["wait"] != 0.0 || !(l["t_us"].(float64) > 0) {
		t.Errorf("load: %v", l)
	}
}
