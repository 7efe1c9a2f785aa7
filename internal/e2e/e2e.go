package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/ownedtmp"
	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
)

// Binaries are the paths of the built commands.
type Binaries struct {
	SMG, MockWorker, LoadGen string
}

var (
	buildOnce sync.Once
	built     Binaries
	buildErr  error
)

// repoRoot finds the module root from this source file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// binPrefix names the directories Build compiles into.
const binPrefix = "smg-e2e-bin-"

// Build compiles the three commands once per test process, into a directory that the first
// Build of a later test process removes (with those of any other process that has ended).
func Build(t testing.TB) Binaries {
	t.Helper()
	buildOnce.Do(func() {
		for _, orphan := range ownedtmp.Orphans(binPrefix) {
			_ = os.RemoveAll(orphan)
		}
		dir, err := ownedtmp.Make(binPrefix)
		if err != nil {
			buildErr = err
			return
		}
		built = Binaries{SMG: filepath.Join(dir, "smg"), MockWorker: filepath.Join(dir, "mockworker"), LoadGen: filepath.Join(dir, "loadgen")}
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/smg", "./cmd/mockworker", "./cmd/loadgen")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// Process is a started command with its combined output captured.
type Process struct {
	Cmd    *exec.Cmd
	output *syncbuf.Buffer
	done   chan struct{}
	err    error
}

// Start runs bin with args; the test's cleanup kills it if it still runs.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartEnv(t, nil, bin, args...)
}

// StartEnv is Start with extra environment variables (KEY=value).
func StartEnv(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(bin, args...), output: &syncbuf.Buffer{}, done: make(chan struct{})}
	if env != nil {
		p.Cmd.Env = append(os.Environ(), env...)
	}
	p.Cmd.Stdout, p.Cmd.Stderr = p.output, p.output
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), tail(p.Output(), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Output returns what the process printed so far.
func (p *Process) Output() string { return p.output.String() }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits up to d for the process to exit and returns its exit code (-1 on timeout).
func (p *Process) Wait(d time.Duration) int {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(d):
		return -1
	}
}

// reserved holds the lock files of the ports FreePort handed out; they stay locked until the
// test process exits (the kernel drops the locks then, even after a crash).
var reserved struct {
	sync.Mutex
	files []*os.File
}

// FreePort returns a TCP port free on host that no other caller of FreePort holds, in this
// test process or any other on the machine (parallel packages of `go test ./...`).
//
// A port chosen by listening on :0 and closing is not enough: the kernel may give the same
// port to the next :0 listener of another package before our process binds it. FreePort
// therefore picks below the kernel's ephemeral range (net.ipv4.ip_local_port_range), which
// :0 listeners and outgoing connections never get, and reserves each port across processes
// with an flock on a file named after it. Use it only for ports a process must be told
// before it starts (mesh ports, engines' bootstrap ports, a port reused after a restart);
// StartGateway and StartMocks listen on :0 and read the bound port back.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "smg-e2e-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	lo, hi := reservablePorts()
	n := hi - lo
	start := int(time.Now().UnixNano()/1000+int64(os.Getpid())*7919) % n
	for i := range n {
		port := lo + (start+i)%n
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another FreePort holds it
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			f.Close() // in use by something that did not ask FreePort
			continue
		}
		ln.Close()
		reserved.Lock()
		reserved.files = append(reserved.files, f)
		reserved.Unlock()
		return port
	}
	t.Fatalf("no reservable free port on %s in %d-%d", host, lo, hi-1)
	return 0
}

// reservablePorts is the range FreePort draws from, [lo, hi): below the ephemeral range, or
// above it when the ephemeral range starts too low to leave room.
func reservablePorts() (lo, hi int) {
	ephLo, ephHi := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if a, err := strconv.Atoi(f[0]); err == nil {
				ephLo = a
			}
			if a, err := strconv.Atoi(f[1]); err == nil {
				ephHi = a
			}
		}
	}
	if ephLo-10000 >= 4096 {
		return 10000, ephLo
	}
	return ephHi + 1, 65536
}

// Mocks is a running mockworker fleet.
type Mocks struct {
	*Process
	URLs []string
}

var listeningLine = regexp.MustCompile(`worker \d+ listening on ((?:https?|grpc)://\S+)`)

// StartMocks runs `mockworker --count n` with extra args on free ports and waits until every
// worker has printed its listening line.
func StartMocks(t testing.TB, n int, args ...string) *Mocks {
	t.Helper()
	b := Build(t)
	all := append([]string{"--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(n)}, args...)
	m := &Mocks{Process: Start(t, b.MockWorker, all...)}
	testutil.Eventually(t, "mock workers listening", func() bool {
		m.URLs = m.URLs[:0]
		for _, match := range listeningLine.FindAllStringSubmatch(m.Output(), -1) {
			m.URLs = append(m.URLs, match[1])
		}
		return len(m.URLs) == n
	})
	return m
}

// Gateway is a running smg.
type Gateway struct {
	*Process
	URL, MetricsURL string
}

// StartGateway runs `smg launch` with args on free ports and waits for /health, and for
// /readiness when args give static workers of every role the mode needs.
func StartGateway(t testing.TB, args ...string) *Gateway {
	t.Helper()
	return startGatewayEnv(t, nil, args...)
}

func startGatewayEnv(t testing.TB, env []string, args ...string) *Gateway {
	t.Helper()
	g := StartGatewayUnready(t, env, args...)
	// Static workers start pending until their first health probe answers: wait until the
	// gateway routes, unless the test runs without health checks (it then routes at once) or
	// gives a disaggregated fleet without every role (it then tests the 503).
	if hasEveryRole(args) && !contains(args, "--disable-health-check") {
		g.WaitReady(t)
	}
	return g
}

// StartGatewayUnready is StartGateway with extra environment variables (KEY=value) that
// waits for /health only: its workers may be down.
func StartGatewayUnready(t testing.TB, env []string, args ...string) *Gateway {
	t.Helper()
	b := Build(t)
	all := append([]string{"launch", "--host", "127.0.0.1", "--port", "0",
		"--prometheus-host", "127.0.0.1", "--prometheus-port", "0"}, args...)
	g := &Gateway{Process: StartEnv(t, env, b.SMG, all...)}
	g.readAddresses(t)
	testutil.Eventually(t, "gateway /health", func() bool {
		r, err := Do("GET", g.URL+"/health", "", nil)
		return err == nil && r.Status == 200
	})
	return g
}

var (
	listenAddrs  = regexp.MustCompile(`msg="SMG-Go gateway listening" address=(\S+) .*metrics=(\S+)`)
	listenAddrsJ = regexp.MustCompile(`"msg":"SMG-Go gateway listening","address":"([^"]+)".*"metrics":"([^"]+)"`)
)

// readAddresses waits for the gateway's "SMG-Go gateway listening" line and sets URL and
// MetricsURL from the addresses it bound (the gateway was started with port 0: ports the
// kernel hands out cannot collide with another test process's).
func (g *Gateway) readAddresses(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, "gateway listening line", func() bool {
		out := g.Output()
		m := listenAddrs.FindStringSubmatch(out)
		if m == nil {
			m = listenAddrsJ.FindStringSubmatch(out)
		}
		if m == nil {
			select {
			case <-g.done:
				t.Fatalf("smg exited before listening:\n%s", tail(out, 4000))
			default:
			}
			return false
		}
		g.URL, g.MetricsURL = "http://"+m[1], "http://"+m[2]+"/metrics"
		return true
	})
}

// hasEveryRole reports whether args name the static workers the gateway needs to be ready:
// regular workers, or in PD mode a prefill and a decode worker, in EPD mode an encode one too.
func hasEveryRole(args []string) bool {
	switch {
	case contains(args, "--epd-disaggregation"):
		return contains(args, "--encode") && contains(args, "--prefill") && contains(args, "--decode")
	case contains(args, "--pd-disaggregation"):
		return contains(args, "--prefill") && contains(args, "--decode")
	default:
		return contains(args, "--worker-urls")
	}
}

// WaitReady waits until GET /readiness answers 200 with every registered worker healthy, so
// that routing no longer changes as workers finish their first health probe.
func (g *Gateway) WaitReady(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, "gateway /readiness 200 with every worker healthy", func() bool {
		r, err := Do("GET", g.URL+"/readiness", "", nil)
		if err != nil || r.Status != 200 {
			return false
		}
		var body struct {
			Healthy int `json:"healthy_workers"`
			Total   int `json:"total_workers"`
		}
		return json.Unmarshal([]byte(r.Body), &body) == nil && body.Healthy == body.Total
	})
}

func contains(args []string, s string) bool {
	for _, a := range args {
		if a == s {
			return true
		}
	}
	return false
}

// Response is a whole HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// Do sends one request and reads the whole answer.
func Do(method, url, body string, header map[string]string) (*Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}, nil
}

// MustDo is Do that fails the test on a transport error.
func MustDo(t testing.TB, method, url, body string, header map[string]string) *Response {
	t.Helper()
	r, err := Do(method, url, body, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// Stream opens a streamed request and returns the response with its body unread.
func Stream(t testing.TB, url, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("stream %s: %v", url, err)
	}
	return resp, bufio.NewReader(resp.Body)
}

// ReadEvent reads one SSE event's data line ("" at the end of the stream).
func ReadEvent(br *bufio.Reader) (string, error) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			return d, nil
		}
	}
}

// Metric returns the value of the Prometheus series whose line starts with series.
func Metric(t testing.TB, metricsURL, series string) (float64, bool) {
	t.Helper()
	r := MustDo(t, "GET", metricsURL, "", nil)
	for _, line := range strings.Split(r.Body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// MeshMemberAlive reports whether a GET /mesh/status body lists member name as ALIVE.
func MeshMemberAlive(body, name string) bool {
	i := strings.Index(body, `"name":"`+name+`"`)
	if i < 0 {
		return false
	}
	rest := body[i:]
	if j := strings.IndexByte(rest, '}'); j >= 0 {
		rest = rest[:j]
	}
	return strings.Contains(rest, `"status":"ALIVE"`)
}
