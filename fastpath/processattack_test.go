package fastpath

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/smg-go/smg/internal/e2e"
)

// procStatusKiB reads a "Name:  N kB" line of /proc/pid/status.
func procStatusKiB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// startBigAnswerWorker is an engine whose generation answers declare Content-Length
// 5,000,000,000 and stream zeros until the gateway hangs up.
func startBigAnswerWorker(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"m1","object":"model"}]}`))
		case r.Method != http.MethodPost:
			_, _ = w.Write([]byte(`{}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "5000000000")
			w.WriteHeader(http.StatusOK)
			buf := make([]byte, 256<<10)
			for {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestWorkerDeclaring5GBKeepsTheGatewayBounded is the attack with real processes: a worker
// declares a 5 GB non-streamed answer to 6 concurrent requests. Before the fix the gateway
// read 256 MiB of each (6 took its RSS to 3.57 GB); now each is refused at its head with 502
// worker_answer_too_large, and the gateway's peak RSS (VmHWM) grows by less than one answer's
// limit (DefaultMaxAnswerSize), which reading any one of them would have passed.
func TestWorkerDeclaring5GBKeepsTheGatewayBounded(t *testing.T) {
	worker := startBigAnswerWorker(t)
	g := e2e.StartGateway(t, "--worker-urls", worker, "--policy", "round_robin")
	pid := g.Cmd.Process.Pid
	if r := e2e.MustDo(t, "GET", g.URL+"/v1/models", "", nil); r.Status != 200 {
		t.Fatalf("/v1/models: %d", r.Status)
	}
	before := procStatusKiB(t, pid, "VmHWM")
	const n = 6
	var wg sync.WaitGroup
	results := make([]*e2e.Response, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = e2e.Do("POST", g.URL+"/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`, nil)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if r := results[i]; r.Status != 502 || r.Header.Get("X-SMG-Error-Code") != "worker_answer_too_large" {
			t.Fatalf("request %d: %d %s %s", i, r.Status, r.Header.Get("X-SMG-Error-Code"), r.Body)
		}
	}
	after, rss := procStatusKiB(t, pid, "VmHWM"), procStatusKiB(t, pid, "VmRSS")
	t.Logf("HOSTILE attack=worker_declares_5GB concurrent=%d vmhwm_before_kib=%d vmhwm_after_kib=%d vmrss_after_kib=%d bound_kib=%d", n, before, after, rss, DefaultMaxAnswerSize>>10)
	if grew := after - before; grew >= DefaultMaxAnswerSize>>10 {
		t.Fatalf("peak RSS grew by %d KiB, bound %d KiB (one answer's limit)", grew, DefaultMaxAnswerSize>>10)
	}
	if r := e2e.MustDo(t, "GET", g.URL+"/health", "", nil); r.Status != 200 {
		t.Fatalf("the gateway after the attack: %d", r.Status)
	}
}
