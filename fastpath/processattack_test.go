package fastpath

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/e2e"
	"github.com/smg-go/smg/internal/testutil"
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

// cpuTicks is the process's user and system CPU time in clock ticks (/proc/pid/stat).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

var gatewayListening = regexp.MustCompile(`msg="SMG-Go gateway listening" address=(\S+) .*metrics=(\S+)`)

// TestDescriptorExhaustionDoesNotSpin is the attack with real processes: smg under
// `prlimit --nofile=512:512` gets 600 idle connections. Before the fix the connection cap
// (65,536) was above the process limit, accept failed with EMFILE, the level-triggered
// listener woke the loop again at once and it spun at 100% CPU while normal requests and
// /metrics timed out. Now the default cap sits below RLIMIT_NOFILE (a new connection past it
// takes an idle one's place) and an accept without a descriptor backs off: over 2 s of the
// idle connections the gateway uses less than half a core (a spin uses a whole one), and a
// request and /metrics are answered.
func TestDescriptorExhaustionDoesNotSpin(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) is needed to run the gateway under a descriptor limit: %v", err)
	}
	mocks := e2e.StartMocks(t, 1)
	b := e2e.Build(t)
	p := e2e.Start(t, prlimit, "--nofile=512:512", b.SMG, "launch", "--host", "127.0.0.1", "--port", "0",
		"--prometheus-host", "127.0.0.1", "--prometheus-port", "0", "--worker-urls", mocks.URLs[0], "--policy", "round_robin")
	var url, metricsURL string
	testutil.Eventually(t, "gateway listening line", func() bool {
		m := gatewayListening.FindStringSubmatch(p.Output())
		if m == nil {
			return false
		}
		url, metricsURL = "http://"+m[1], "http://"+m[2]+"/metrics"
		return true
	})
	testutil.Eventually(t, "gateway ready", func() bool {
		r, err := e2e.Do("GET", url+"/readiness", "", nil)
		return err == nil && r.Status == 200
	})
	pid := p.Cmd.Process.Pid
	if limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); !regexp.MustCompile(`Max open files\s+512\s+512`).Match(limits) {
		t.Fatalf("the gateway does not run under the limit:\n%s", limits)
	}
	addr := strings.TrimPrefix(url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 600 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	// The idle stretch: the connections are open, nobody sends.
	time.Sleep(200 * time.Millisecond) // let the accepts run (the measure below is a ratio, not a time)
	t0, c0 := time.Now(), cpuTicks(t, pid)
	time.Sleep(2 * time.Second)
	wall, cpu := time.Since(t0), time.Duration(cpuTicks(t, pid)-c0)*10*time.Millisecond // USER_HZ is 100 on Linux
	ratio := cpu.Seconds() / wall.Seconds()
	r, err := e2e.Do("POST", url+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, nil)
	status, body := 0, ""
	if err == nil {
		status, body = r.Status, r.Body
	}
	mr, merr := e2e.Do("GET", metricsURL, "", nil)
	t.Logf("HOSTILE attack=descriptor_exhaustion nofile=512 idle_conns=600 cpu_over_idle=%.3f request_status=%d request_err=%v metrics_err=%v", ratio, status, err, merr)
	if ratio >= 0.5 {
		t.Fatalf("the gateway used %.0f%% of a core over %v of idle connections (a spinning accept loop uses 100%%)", 100*ratio, wall.Round(time.Millisecond))
	}
	if err != nil || status != 200 {
		t.Fatalf("a normal request under the attack: %v %v %s", status, err, body)
	}
	if merr != nil || mr.Status != 200 {
		t.Fatalf("/metrics under the attack: %v", merr)
	}
}
