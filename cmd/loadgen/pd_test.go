package main

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/loadgen"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
)

// startMockPD starts a real prefill mock (its KV rendezvous on a free port) and a real
// decode mock that asks that rendezvous by default.
func startMockPD(t *testing.T) (prefill, decode *mockworker.Fleet) {
	t.Helper()
	pc := mockworker.DefaultConfig() // on 127.0.0.1
	pc.Role, pc.TokenInterval = mockworker.RolePrefill, time.Millisecond
	prefill = mockworkertest.Start(t, pc)
	dc := mockworker.DefaultConfig()
	dc.Role, dc.BootstrapPort, dc.KVTransferTimeout, dc.TokenInterval = mockworker.RoleDecode, prefill.BootstrapPort(), 5*time.Second, time.Millisecond
	return prefill, mockworkertest.Start(t, dc)
}

// TestPDAgainstRealMocks runs the command's PD mode against the mock engines' prefill and
// decode roles: the mocks fail any request whose halves do not meet (another prompt, a
// missing prefill, a foreign bootstrap host), so all requests succeeding is the proof.
func TestPDAgainstRealMocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"chat json", []string{"--stream=false"}},
		{"chat sse", []string{"--stream=true"}},
		{"generate sse", []string{"--endpoint", "generate"}},
		{"completions, null port", []string{"--endpoint", "completions", "--pd-bootstrap-port", "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefill, decode := startMockPD(t)
			args := []string{"--model", "mock-model", "--workload", "random", "--random-input-len", "32", "--random-output-len", "4",
				"--num-requests", "40", "--max-concurrency", "4", "--progress", "off", "--timeout", "20s",
				"--pd-prefill", prefill.URLs()[0], "--pd-decode", decode.URLs()[0], "--pd-bootstrap-port", strconv.Itoa(prefill.BootstrapPort())}
			cfg, _, code, done := parseRun(append(args, tc.args...), io.Discard)
			if done {
				t.Fatalf("parseRun exited %d", code)
			}
			res, err := loadgen.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Completed != 40 || res.Failed != 0 {
				t.Fatalf("completed %d failed %d: %v %v", res.Completed, res.Failed, res.StatusCounts, res.ErrorExamples)
			}
			p, d := prefill.Workers()[0].PDStats(), decode.Workers()[0].PDStats()
			if p.OK != 40 || d.OK != 40 || p != (mockworker.PDStats{OK: 40}) || d != (mockworker.PDStats{OK: 40}) {
				t.Errorf("mock PD counts: prefill %+v, decode %+v; want 40 ok each", p, d)
			}
		})
	}
}

// TestPDWrongBootstrapPortFailsAsPrefillError: a prefill rejects a bootstrap_port that is
// not its rendezvous', and loadgen reports the prefill's answer.
func TestPDWrongBootstrapPortFailsAsPrefillError(t *testing.T) {
	prefill, decode := startMockPD(t)
	cfg := loadgen.DefaultConfig()
	cfg.Model, cfg.Workload, cfg.NumRequests, cfg.Timeout = "mock-model", loadgen.WorkloadRaw, 3, 20*time.Second
	cfg.PD = loadgen.PDConfig{Prefill: prefill.URLs(), Decode: decode.URLs(), BootstrapPort: prefill.BootstrapPort() + 1}
	res, err := loadgen.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 3 || res.StatusCounts["prefill_error"] != 3 {
		t.Fatalf("failed %d %v, want 3 prefill_error", res.Failed, res.StatusCounts)
	}
	if ex := res.ErrorExamples["prefill_error"]; !strings.Contains(ex, "HTTP 400") {
		t.Errorf("example %q, want the prefill's 400", ex)
	}
}
