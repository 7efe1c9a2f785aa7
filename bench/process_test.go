package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestProcStartWaitOutputStop(t *testing.T) {
	p, err := start(-1, "/bin/sh", "-c", "echo 'x listening on http://127.0.0.1:1'; echo 'y listening on http://127.0.0.1:2'; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	urls, err := p.waitOutput(listenLine, 2, 10*time.Second)
	if err != nil {
		p.stop()
		t.Fatal(err)
	}
	if strings.Join(urls, " ") != "http://127.0.0.1:1 http://127.0.0.1:2" {
		t.Errorf("waitOutput = %v", urls)
	}
	if cpu, err := p.cpuSeconds(); err != nil || cpu < 0 {
		t.Errorf("cpuSeconds = %v, %v", cpu, err)
	}
	p.stop()
	select {
	case <-p.done:
	default:
		t.Fatal("stop returned with the process still running")
	}
}

func TestWaitOutputReportsEarlyExit(t *testing.T) {
	p, err := start(-1, "/bin/sh", "-c", "echo boom; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.waitOutput(regexp.MustCompile(`never (printed)`), 1, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited early") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("waitOutput = %v, want an early-exit error with the output", err)
	}
	if err := p.wait(); err == nil {
		t.Error("wait on exit status 3 returned nil")
	}
}

// fakeLoadgen writes a script that behaves like `loadgen run --output F`: it writes a fixed
// result to F.
func fakeLoadgen(t *testing.T, result string) string {
	t.Helper()
	dir := t.TempDir()
	res := filepath.Join(dir, "result.json")
	if err := os.WriteFile(res, []byte(result), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "loadgen")
	body := "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --output ]; then cp " + res + " \"$2\"; fi; shift; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestDriveReadsTheLoadgenResult(t *testing.T) {
	lg := fakeLoadgen(t, `{"completed": 9000, "failed": 0, "request_throughput": 3000,
		"e2e_latency_ms": {"median": 1.5, "p99": 7}, "ttft_ms": {"median": 0.5, "p99": 2}}`)
	cfg := DefaultOverheadConfig()
	cfg.Bin, cfg.WorkDir, cfg.ProxyCore, cfg.LoadCore = Binaries{LoadGen: lg}, t.TempDir(), -1, -1
	cfg.derive()
	cfg.Warmup = 1000
	m, err := cfg.drive(Measurement{Key: "direct", Name: "direct"}, "", baseURLArgs("http://127.0.0.1:1"), nil, cfg.regularLoad(true))
	if err != nil {
		t.Fatal(err)
	}
	if m.RPS != 3000 || m.P50MS != 1.5 || m.P99MS != 7 || m.TTFTP50MS != 0.5 || m.TTFTP99MS != 2 || m.Completed != 9000 {
		t.Errorf("measurement = %+v", m)
	}
	if m.CPUPerRequestUS != 0 {
		t.Errorf("a direct run has no proxy CPU, got %g", m.CPUPerRequestUS)
	}
}

func TestDriveFailsOnFailedRequests(t *testing.T) {
	lg := fakeLoadgen(t, `{"completed": 10, "failed": 2, "error_examples": {"502": "bad gateway"}}`)
	cfg := DefaultOverheadConfig()
	cfg.Bin, cfg.WorkDir, cfg.ProxyCore, cfg.LoadCore = Binaries{LoadGen: lg}, t.TempDir(), -1, -1
	cfg.derive()
	_, err := cfg.drive(Measurement{Key: "smg-x", Name: "smg (x)"}, "", baseURLArgs("http://127.0.0.1:1"), nil, cfg.regularLoad(false))
	if err == nil || !strings.Contains(err.Error(), "2 requests failed") || !strings.Contains(err.Error(), "bad gateway") {
		t.Errorf("drive = %v, want the failures named", err)
	}
}

func TestDrivePacedLoad(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "result.json")
	if err := os.WriteFile(res, []byte(`{"completed": 1744, "failed": 0, "request_throughput": 390,
		"e2e_latency_ms": {"median": 650, "p99": 700}, "ttft_ms": {"median": 21, "p99": 30}, "itl_ms": {"median": 20, "p99": 26}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := filepath.Join(dir, "args")
	script := filepath.Join(dir, "loadgen")
	body := "#!/bin/sh\necho \"$@\" > " + args + "\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --output ]; then cp " + res + " \"$2\"; fi; shift; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultOverheadConfig()
	cfg.Bin, cfg.WorkDir, cfg.ProxyCore, cfg.LoadCore = Binaries{LoadGen: script}, dir, -1, -1
	cfg.derive()
	m, err := cfg.drive(Measurement{Key: "direct", Name: "direct"}, "", baseURLArgs("http://127.0.0.1:1"), nil, cfg.pacedLoad())
	if err != nil {
		t.Fatal(err)
	}
	if m.TTFTP50MS != 21 || m.ITLP50MS != 20 || m.ITLP99MS != 26 || m.RPS != 390 {
		t.Errorf("measurement = %+v", m)
	}
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--stream=true", "--max-concurrency 256", "--duration 4s", "--warmup 256", "--output-tokens 32",
		filepath.Join(dir, "direct-sse_paced.json")} {
		if !strings.Contains(string(b), want) {
			t.Errorf("loadgen args %q lack %q", b, want)
		}
	}
}

// TestParsePerfCount reads the count of `perf stat -x ,` output and refuses output without it.
func TestParsePerfCount(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/good"
	if err := os.WriteFile(good, []byte("# started on Thu Dec  3 14:00:00 2026\n\n123456,,raw_syscalls:sys_enter,3000000,100.00,,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := parsePerfCount(good); err != nil || n != 123456 {
		t.Errorf("parsePerfCount = %d, %v; want 123456", n, err)
	}
	bad := dir + "/bad"
	if err := os.WriteFile(bad, []byte("<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parsePerfCount(bad); err == nil {
		t.Error("parsePerfCount accepted a count that is not a number")
	}
	if _, err := parsePerfCount(dir + "/missing"); err == nil {
		t.Error("parsePerfCount accepted a missing file")
	}
}

// TestCPUTimeCountsThreads: cpuTime (schedstat, ns) sees a busy process's CPU.
func TestCPUTimeCountsThreads(t *testing.T) {
	p, err := start(-1, "/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cpu, err := p.cpuTime()
		if err != nil {
			t.Fatal(err)
		}
		if cpu > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cpuTime stayed 0 for a busy shell")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
