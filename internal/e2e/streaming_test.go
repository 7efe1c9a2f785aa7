package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// streamedBodyRSSGrowthBoundMiB bounds how much the gateway's peak RSS may grow while it
// forwards one 48 MiB body that it streams (--max-buffered-request-bytes, default 1 MiB): the
// head, copy buffers and the client's and worker's socket buffers, not the body.
const streamedBodyRSSGrowthBoundMiB = 24

// TestLargeBodyStreamedToTheWorkerIntact (issue 18): a 48 MiB chat body, past the default
// --max-buffered-request-bytes, reaches a real mock engine byte for byte (the engine answers
// the SHA-256 of what it received) although its tail is not JSON, which proves the gateway did
// not parse it (a parsed body that is not JSON gets 400), while the gateway's peak RSS grows
// by less than half the body; nothing stays in flight. A small body goes the parsed way.
func TestLargeBodyStreamedToTheWorkerIntact(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	pid := g.Cmd.Process.Pid
	fault := map[string]string{"X-Mock-Fault": "body-sha256"}

	small := `{"model":"mock-model","messages":[{"role":"user","content":"hi"}]}`
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", small+" not json", fault); r.Status != 400 {
		t.Fatalf("a small body that is not JSON: %d %s, want 400 from the gateway's parser", r.Status, r.Body)
	}
	checkHash(t, MustDo(t, "POST", g.URL+"/v1/chat/completions", small, fault), small)

	rssBefore := procStatusKB(t, pid, "VmRSS")
	large := `{"model":"mock-model","messages":[{"role":"user","content":"` + strings.Repeat("0123456789abcdef", 3<<20) + `"}]} not json`
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", large, fault)
	checkHash(t, r, large)
	peak := procStatusKB(t, pid, "VmHWM")
	t.Logf("STREAMED body %d MiB: gateway RSS %d KiB before, peak %d KiB", len(large)>>20, rssBefore, peak)
	if grown := (peak - rssBefore) / 1024; grown > streamedBodyRSSGrowthBoundMiB {
		t.Fatalf("the gateway's peak RSS grew %d MiB forwarding a %d MiB body, bound %d MiB: the body was buffered", grown, len(large)>>20, streamedBodyRSSGrowthBoundMiB)
	}
	if v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, m.URLs[0])); !ok || v != 0 {
		t.Fatalf("%v requests in flight after the streamed one ended", v)
	}
}

// checkHash checks that the mock engine's answer names the SHA-256 and length of body.
func checkHash(t *testing.T, r *Response, body string) {
	t.Helper()
	var got struct {
		SHA256 string `json:"body_sha256"`
		Bytes  int    `json:"body_bytes"`
	}
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &got) != nil {
		t.Fatalf("answer %d %s", r.Status, r.Body)
	}
	sum := sha256.Sum256([]byte(body))
	if got.SHA256 != hex.EncodeToString(sum[:]) || got.Bytes != len(body) {
		t.Fatalf("the engine received %d bytes with SHA-256 %s; sent %d bytes with %x", got.Bytes, got.SHA256, len(body), sum)
	}
}
