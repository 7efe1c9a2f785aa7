package e2e

// The fault-injection proofs: real smg and mockworker processes on loopback, faults
// injected in the engines (per-worker admin config, killed processes, a resetting front), load
// driven by goroutines here. Every scenario counts what it sent, what succeeded and why the
// rest failed, logs one "RELIABILITY ..." line (copied into docs/reliability.md), and ends by
// proving that the gateway holds nothing: every worker's in-flight count is back to 0 and the
// gateway's goroutine count is back to its idle level.
//
// The scenarios run in parallel: most of each one's wall time is spent waiting for fasthttp to
// retire its idle server goroutines (see settleGoroutines), which costs no CPU.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// faultFlags make every mechanism react within about a second, so that a scenario settles in
// a few seconds of load: probes every second, breakers that open after 3 faults and probe
// again after 1 s, retries 5 ms apart.
var faultFlags = []string{
	"--policy", "round_robin",
	"--health-check-interval-secs", "1", "--health-check-timeout-secs", "1",
	"--cb-failure-threshold", "3", "--cb-timeout-duration-secs", "1",
	"--retry-initial-backoff-ms", "5", "--retry-max-backoff-ms", "50",
	"--drain-settle-secs", "0",
}

const cbThreshold = 3

func gatewayArgs(workers []string, extra ...string) []string {
	args := append(append([]string{}, faultFlags...), extra...)
	return append(append(args, "--worker-urls"), workers...)
}

// tally counts one scenario's requests by outcome; a failure is counted under its cause.
type tally struct {
	mu     sync.Mutex
	sent   int
	ok     int
	failed map[string]int
}

func newTally() *tally { return &tally{failed: map[string]int{}} }

// count records one request: cause "" is a success.
func (c *tally) count(cause string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent++
	if cause == "" {
		c.ok++
	} else {
		c.failed[cause]++
	}
}

func (c *tally) failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent - c.ok
}

func (c *tally) causes() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.failed))
	for k, v := range c.failed {
		m[k] = v
	}
	return m
}

// report logs the scenario's RELIABILITY line.
func (c *tally) report(t *testing.T, scenario string, leaks int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.failed))
	for k := range c.failed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s:%d,", k, c.failed[k])
	}
	t.Logf("RELIABILITY scenario=%s sent=%d ok=%d failed=%d{%s} leaks=%d",
		scenario, c.sent, c.ok, c.sent-c.ok, strings.TrimSuffix(b.String(), ","), leaks)
}

// newLoadClient is one scenario's HTTP client: its own connection pool, so that closing its
// idle connections at the end lets the gateway's per-connection goroutines end. Its timeout
// bounds a request, body included, so a hung answer shows up as cause "hung".
func newLoadClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 15 * time.Second}
}

// answer is the outcome of one non-streamed request.
type answer struct {
	status int
	code   string // X-SMG-Error-Code, for gateway-made errors
	worker string // X-Smg-Routed-Worker-Id
}

func send(c *http.Client, url, body string, header map[string]string) (answer, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header.Get("X-Smg-Error-Code"), resp.Header.Get("X-Smg-Routed-Worker-Id")}, nil
}

// cause names why a request failed: "" for a 200, else the status and the gateway's error
// code (or "worker" when the worker's own answer was passed on), or the transport failure.
func cause(a answer, err error) string {
	switch {
	case err != nil:
		return transportCause(err)
	case a.status == 200:
		return ""
	case a.code != "":
		return strconv.Itoa(a.status) + "_" + a.code
	default:
		return strconv.Itoa(a.status) + "_worker"
	}
}

func transportCause(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "hung"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "cut"
	default:
		return "transport_error"
	}
}

// streamOutcome reads a streamed answer to its end and names how it ended: "" for a clean
// end ([DONE] and no error event), "error_event_<code>" for a stream the gateway closed with
// an SSE error event and [DONE], "cut" for a body that stopped without [DONE], "hung" for one
// that did not end within the client's timeout, or the status of a non-200 answer.
func streamOutcome(resp *http.Response) string {
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		_, _ = io.Copy(io.Discard, resp.Body)
		return cause(answer{status: resp.StatusCode, code: resp.Header.Get("X-Smg-Error-Code")}, nil)
	}
	br := bufio.NewReader(resp.Body)
	errorCode := ""
	for {
		ev, err := ReadEvent(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "cut" // the body ended cleanly but without [DONE]
			}
			return transportCause(err)
		}
		if ev == "[DONE]" {
			// A well-formed end: the terminating chunk must follow.
			if _, err := io.Copy(io.Discard, br); err != nil {
				return "cut"
			}
			if errorCode != "" {
				return "error_event_" + errorCode
			}
			return ""
		}
		if code, ok := errorEventCode(ev); ok {
			errorCode = code
		}
	}
}

// errorEventCode extracts the code of an SSE error event such as
// {"error":{"message":...,"code":"worker_stream_failed",...}}.
func errorEventCode(ev string) (string, bool) {
	if !strings.HasPrefix(ev, `{"error":`) {
		return "", false
	}
	_, rest, ok := strings.Cut(ev, `"code":"`)
	if !ok {
		return "unknown", true
	}
	code, _, _ := strings.Cut(rest, `"`)
	return code, true
}

func openStream(c *http.Client, url, body string) (*http.Response, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.Do(req)
}

// load runs n client goroutines calling do until stop is closed.
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func startLoad(n int, do func(i int)) *load {
	l := &load{stop: make(chan struct{})}
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				do(i)
			}
		}()
	}
	return l
}

func (l *load) finish() { close(l.stop); l.wg.Wait() }

// metricOf reads one series, 0 when it is absent.
func metricOf(t *testing.T, metricsURL, series string) float64 {
	t.Helper()
	v, _ := Metric(t, metricsURL, series)
	return v
}

func activeSeries(worker string) string {
	return fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, worker)
}

func cbStateSeries(worker string) string {
	return fmt.Sprintf(`smg_worker_cb_state{worker=%q}`, worker)
}

func upstreamSeries(worker, outcome string) string {
	return fmt.Sprintf(`smg_router_upstream_responses_total{worker=%q,outcome=%q}`, worker, outcome)
}

// inFlightLeaks waits up to 10 s for every worker's in-flight count to be 0 and returns what
// is left (the gateway settles counts on its own goroutines, so a moment may pass). A series
// that is missing counts as a leak of 1: the gateway must keep reporting every worker.
func inFlightLeaks(t *testing.T, metricsURL string, workers []string) int64 {
	t.Helper()
	var left int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		left = 0
		for _, w := range workers {
			v, ok := Metric(t, metricsURL, activeSeries(w))
			if !ok {
				v = 1
			}
			left += int64(v)
		}
		if left == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutines reads the gateway's go_goroutines.
func goroutines(t *testing.T, g *Gateway) float64 {
	t.Helper()
	v, ok := Metric(t, g.MetricsURL, "go_goroutines")
	if !ok {
		t.Fatalf("no go_goroutines on %s", g.MetricsURL)
	}
	return v
}

// settleGoroutines waits until the gateway's goroutine count is back within tolerance of its
// idle level, measured before the load. The tolerance is one goroutine per worker plus 3:
// fasthttp's HostClient runs one idle-connection cleaner goroutine per worker as long as it
// keeps a keep-alive connection to it (up to 90 s), and a few goroutines come and go with the
// probes and the metrics scrape itself. A leak of one goroutine per request, per stream or per
// retry would exceed it by hundreds.
//
// The wait may be long (up to 30 s): fasthttp's server keeps an idle worker goroutine per
// connection it served for MaxIdleWorkerDuration (10 s) and retires them on a 10 s sweep, so
// the count only falls back to idle about 10-20 s after the last request.
func settleGoroutines(t *testing.T, g *Gateway, idle float64, workers int) {
	t.Helper()
	// Idle keep-alive connections hold a goroutine or two each; a leak per request would be
	// hundreds above this.
	limit := idle + 2*float64(workers) + 6
	var now float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		now = goroutines(t, g)
		if now <= limit {
			t.Logf("goroutines: idle %v, after the scenario %v (limit %v)", idle, now, limit)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: idle %v, still %v 30 s after the scenario (limit %v): a leak", idle, now, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// finishScenario closes the client's idle connections, reports, and checks that nothing leaked.
func finishScenario(t *testing.T, scenario string, c *tally, client *http.Client, g *Gateway, idle float64, workers []string) {
	t.Helper()
	client.CloseIdleConnections()
	leaks := inFlightLeaks(t, g.MetricsURL, workers)
	c.report(t, scenario, leaks)
	if leaks != 0 {
		t.Errorf("in-flight leak: %d requests still counted on the workers", leaks)
	}
	settleGoroutines(t, g, idle, len(workers))
}

// postAdmin changes a mock worker's runtime faults.
func postAdmin(t *testing.T, worker, config string) {
	t.Helper()
	if r := MustDo(t, "POST", worker+"/admin/config", config, nil); r.Status != 200 {
		t.Fatalf("admin config %s on %s: %d %s", config, worker, r.Status, r.Body)
	}
}

func portOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Port()
}

func kill(t *testing.T, m *Mocks) {
	t.Helper()
	if err := m.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.Wait(5 * time.Second)
}

const (
	faultChat       = `{"model":"mock-model","messages":[{"role":"user","content":"hello"}]}`
	faultChatShort  = `{"model":"mock-model","max_tokens":4,"messages":[{"role":"user","content":"hello"}]}`
	faultChatStream = `{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"hello"}]}`
)

// A worker killed mid-load: non-streamed requests all succeed through retries; a stream that
// had started on the killed worker ends with an SSE error event and [DONE], none is cut and
// none hangs. The worker comes back on its port and the gateway serves it again.
func TestFaultWorkerKilledMidLoad(t *testing.T) {
	t.Parallel()
	mockArgs := []string{"--output-tokens", "60", "--token-interval-ms", "10"} // 0.6 s streams
	survivors := StartMocks(t, 2, mockArgs...)
	// The victim comes back on its port: a reserved one, which no other process can take while it is dead.
	victim := StartMocks(t, 1, append(mockArgs, "--port", strconv.Itoa(FreePort(t, "127.0.0.1")))...)
	victimURL := victim.URLs[0]
	workers := append(append([]string{}, survivors.URLs...), victimURL)
	g := StartGateway(t, gatewayArgs(workers)...)
	idle := goroutines(t, g)
	client := newLoadClient()
	plain, streams := newTally(), newTally()
	url := g.URL + "/v1/chat/completions"

	// Non-streamed requests take about 50 ms at the engine (20 ms to the first token, then
	// 3 more 10 ms apart), so some are in flight on the victim when it dies.
	slow := map[string]string{"x-mock-fault": "slow-ttft=20"}
	l := startLoad(8, func(i int) {
		if i < 5 {
			plain.count(cause(send(client, url, faultChatShort, slow)))
			return
		}
		resp, err := openStream(client, url, faultChatStream)
		if err != nil {
			streams.count(transportCause(err))
			return
		}
		streams.count(streamOutcome(resp))
	})

	// Hold a stream that is known to run on the victim when it dies: round robin puts one
	// there within a few tries.
	var pinned *http.Response
	var others sync.WaitGroup
	defer others.Wait()
	for range 30 {
		resp, err := openStream(client, url, faultChatStream)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("X-Smg-Routed-Worker-Id") == victimURL {
			pinned = resp
			break
		}
		others.Add(1)
		go func() { defer others.Done(); streams.count(streamOutcome(resp)) }()
	}
	if pinned == nil {
		t.Fatal("no stream landed on the victim in 30 tries")
	}
	br := bufio.NewReader(pinned.Body)
	if _, err := ReadEvent(br); err != nil {
		t.Fatalf("first event of the pinned stream: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	kill(t, victim)
	pinnedEnd := streamOutcome(&http.Response{StatusCode: 200, Body: io.NopCloser(br), Header: pinned.Header})
	pinned.Body.Close()
	streams.count(pinnedEnd)

	time.Sleep(time.Second) // load while the victim is dead
	restarted := StartMocks(t, 1, append(mockArgs, "--port", portOf(t, victimURL))...)
	if restarted.URLs[0] != victimURL {
		t.Fatalf("restarted victim on %s, want %s", restarted.URLs[0], victimURL)
	}
	before := metricOf(t, g.MetricsURL, upstreamSeries(victimURL, "2xx"))
	testutil.Eventually(t, "the restarted worker serving again", func() bool {
		return metricOf(t, g.MetricsURL, upstreamSeries(victimURL, "2xx")) > before
	})
	l.finish()
	others.Wait()

	if pinnedEnd != "error_event_worker_stream_failed" {
		t.Errorf("the stream running on the killed worker ended %q, want an SSE error event (worker_stream_failed) then [DONE]", pinnedEnd)
	}
	if plain.failures() != 0 {
		t.Errorf("non-streamed requests failed: %v", plain.causes())
	}
	// Each attempt that failed on the dead worker was retried: the clients saw none of them.
	// How many there are depends on how many streams broke there first (the breaker opens
	// after 3 faults of either kind), so it is logged, not asserted.
	failedOnVictim := metricOf(t, g.MetricsURL, upstreamSeries(victimURL, "error"))
	t.Logf("non-streamed: %d sent, %d ok; attempts that failed on the killed worker and were retried: %v", plain.sent, plain.ok, failedOnVictim)
	for c, n := range streams.causes() {
		if c != "error_event_worker_stream_failed" {
			t.Errorf("%d streams ended %q: streams must end cleanly or with the error event", n, c)
		}
	}
	t.Logf("streams: %d sent, %d clean, %v", streams.sent, streams.ok, streams.causes())
	all := newTally()
	for _, c := range []*tally{plain, streams} {
		all.sent += c.sent
		all.ok += c.ok
		for k, v := range c.causes() {
			all.failed[k] += v
		}
	}
	finishScenario(t, "worker_killed_mid_load", all, client, g, idle, workers)
}

// A worker that answers half its requests with 503 is busy, not broken: its breaker stays
// closed and it keeps getting traffic, but retries move its refused requests elsewhere, so it
// serves less than the others, and no client sees a 503.
func TestFaultWorker503sIsNotEjectedButServesLess(t *testing.T) {
	t.Parallel()
	m := StartMocks(t, 3)
	busy := m.URLs[0]
	postAdmin(t, busy, `{"failure_rate":0.5,"failure_status":503}`)
	g := StartGateway(t, gatewayArgs(m.URLs)...)
	idle := goroutines(t, g)
	client := newLoadClient()
	c := newTally()
	l := startLoad(6, func(int) { c.count(cause(send(client, g.URL+"/v1/chat/completions", faultChat, nil))) })
	var opened int
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if metricOf(t, g.MetricsURL, cbStateSeries(busy)) != 0 {
			opened++
		}
	}
	l.finish()

	if c.failures() != 0 {
		t.Errorf("clients saw failures: %v", c.causes())
	}
	if opened != 0 {
		t.Errorf("the busy worker's breaker was not closed in %d samples: 503 is backpressure, not a fault", opened)
	}
	served := func(w string) float64 { return metricOf(t, g.MetricsURL, upstreamSeries(w, "2xx")) }
	refused := metricOf(t, g.MetricsURL, upstreamSeries(busy, "5xx"))
	t.Logf("2xx served: busy %v (and %v 503s), others %v, %v", served(busy), refused, served(m.URLs[1]), served(m.URLs[2]))
	if served(busy) == 0 || refused == 0 {
		t.Errorf("the busy worker was ejected or never refused: %v served, %v refused", served(busy), refused)
	}
	for _, w := range m.URLs[1:] {
		if served(busy) >= served(w) {
			t.Errorf("the busy worker served %v, not less than %s's %v", served(busy), w, served(w))
		}
	}
	if h := metricOf(t, g.MetricsURL, fmt.Sprintf(`smg_worker_health{worker=%q}`, busy)); h != 1 {
		t.Errorf("the busy worker's health is %v, want 1 (ready)", h)
	}
	finishScenario(t, "worker_returns_503", c, client, g, idle, m.URLs)
}

// resettingFront is a worker address that proxies to a real mock worker or, while resetting,
// answers every POST with a TCP reset (the connection closed with SO_LINGER 0). GETs (health
// probes, model discovery) always pass, so that what ejects the worker is the breaker.
type resettingFront struct {
	URL       string
	resetting atomic.Bool
	resets    atomic.Int64
	proxied   atomic.Int64
	srv       *http.Server
}

func newResettingFront(t *testing.T, target string) *resettingFront {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &resettingFront{URL: "http://" + ln.Addr().String()}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && f.resetting.Load() {
			f.resets.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
			return
		}
		if r.Method == "POST" {
			f.proxied.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}), ErrorLog: nil}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { _ = f.srv.Close() })
	return f
}

// A worker whose connections reset is ejected by its breaker after at most the failure
// threshold (plus the requests already on their way when the threshold was reached), probed
// again after the breaker's timeout, and re-admitted once it recovers. Retries hide the resets
// from clients.
func TestFaultResettingWorkerEjectedByBreakerAndReadmitted(t *testing.T) {
	t.Parallel()
	m := StartMocks(t, 3)
	front := newResettingFront(t, m.URLs[0])
	workers := []string{front.URL, m.URLs[1], m.URLs[2]}
	g := StartGateway(t, gatewayArgs(workers)...)
	idle := goroutines(t, g)
	client := newLoadClient()
	c := newTally()
	const clients = 6
	l := startLoad(clients, func(int) { c.count(cause(send(client, g.URL+"/v1/chat/completions", faultChat, nil))) })

	time.Sleep(300 * time.Millisecond)
	front.resetting.Store(true)
	testutil.Eventually(t, "the resetting worker's breaker open", func() bool {
		return metricOf(t, g.MetricsURL, cbStateSeries(front.URL)) == 1
	})
	atOpen := front.resets.Load()
	const phase = 2 * time.Second // while resetting: the breaker probes about twice
	time.Sleep(phase)
	resetsWhileOpen := front.resets.Load() - atOpen
	if h := metricOf(t, g.MetricsURL, fmt.Sprintf(`smg_worker_health{worker=%q}`, front.URL)); h != 1 {
		t.Errorf("health %v: probes pass, so the ejection must be the breaker's alone", h)
	}
	front.resetting.Store(false)
	proxiedBefore := front.proxied.Load()
	testutil.Eventually(t, "the recovered worker's breaker closed and serving", func() bool {
		return metricOf(t, g.MetricsURL, cbStateSeries(front.URL)) == 0 && front.proxied.Load() > proxiedBefore+10
	})
	l.finish()

	t.Logf("resets before the breaker was seen open: %d; during %v open: %d", atOpen, phase, resetsWhileOpen)
	if c.failures() != 0 {
		t.Errorf("clients saw failures: %v", c.causes())
	}
	// Before it opened: the threshold, plus at most one request per client already sent.
	if atOpen > cbThreshold+clients {
		t.Errorf("%d requests reached the resetting worker before its breaker opened, want <= %d", atOpen, cbThreshold+clients)
	}
	// While open: only half-open probes, a handful per 1 s timeout.
	if resetsWhileOpen > 3*(cbThreshold+clients) {
		t.Errorf("%d requests reached the worker while its breaker was open for %v", resetsWhileOpen, phase)
	}
	finishScenario(t, "worker_resets_connections", c, client, g, idle, workers)
}

// A worker that hangs is cut at the request timeout and the request retried elsewhere.
func TestFaultHangingWorkerCutAtTimeoutAndRetried(t *testing.T) {
	t.Parallel()
	m := StartMocks(t, 3)
	hung := m.URLs[0]
	postAdmin(t, hung, `{"delay_ms":600000}`)
	g := StartGateway(t, gatewayArgs(m.URLs, "--request-timeout-secs", "2")...)
	idle := goroutines(t, g)
	client := newLoadClient()
	c := newTally()
	var routedToHung atomic.Int64
	l := startLoad(6, func(int) {
		a, err := send(client, g.URL+"/v1/chat/completions", faultChat, nil)
		if err == nil && a.worker == hung {
			routedToHung.Add(1)
		}
		c.count(cause(a, err))
	})
	testutil.Eventually(t, "requests cut on the hanging worker", func() bool {
		return metricOf(t, g.MetricsURL, upstreamSeries(hung, "error")) >= 1
	})
	time.Sleep(time.Second)
	l.finish()
	cut := metricOf(t, g.MetricsURL, upstreamSeries(hung, "error"))
	t.Logf("attempts cut at the timeout on the hanging worker: %v", cut)
	if c.failures() != 0 {
		t.Errorf("clients saw failures: %v (a request cut at the timeout must be retried on another worker)", c.causes())
	}
	if routedToHung.Load() != 0 {
		t.Errorf("%d answers came from the hanging worker", routedToHung.Load())
	}
	postAdmin(t, hung, `{"delay_ms":0}`)
	finishScenario(t, "worker_hangs", c, client, g, idle, m.URLs)
}

// All workers down: the gateway answers 503 no_available_workers at once (after the few
// requests that find out), never hangs, and serves again when the workers return.
func TestFaultAllWorkersDownThenBack(t *testing.T) {
	t.Parallel()
	// Reserved ports: the workers come back on them.
	a, b := StartMocks(t, 1, "--port", strconv.Itoa(FreePort(t, "127.0.0.1"))), StartMocks(t, 1, "--port", strconv.Itoa(FreePort(t, "127.0.0.1")))
	workers := []string{a.URLs[0], b.URLs[0]}
	g := StartGateway(t, gatewayArgs(workers)...)
	idle := goroutines(t, g)
	client := newLoadClient()
	c := newTally()
	url := g.URL + "/v1/chat/completions"
	for range 20 {
		c.count(cause(send(client, url, faultChat, nil)))
	}
	kill(t, a)
	kill(t, b)

	// Sequentially: the first requests find the workers dead (502 worker_unreachable after
	// trying each); once each breaker has seen its threshold of faults, 503 at once.
	var before503 int
	for streak := 0; streak < 20; {
		cs := cause(send(client, url, faultChat, nil))
		c.count(cs)
		switch cs {
		case "503_no_available_workers":
			streak++
		case "502_worker_unreachable":
			if streak > 0 {
				t.Fatalf("a 502 after %d 503s", streak)
			}
			before503++
			if before503 > cbThreshold*len(workers) {
				t.Fatalf("still 502 after %d requests: the breakers should have opened", before503)
			}
		default:
			t.Fatalf("with every worker dead: %q", cs)
		}
	}
	// Under concurrent load while down: only 503s (the breakers let a probe through now and
	// then, which a client may see as one more 502).
	down := newTally()
	l := startLoad(4, func(int) { cs := cause(send(client, url, faultChat, nil)); c.count(cs); down.count(cs) })
	time.Sleep(time.Second)
	l.finish()
	for cs, n := range down.causes() {
		if cs != "503_no_available_workers" && cs != "502_worker_unreachable" {
			t.Errorf("%d requests failed %q while all workers were down", n, cs)
		}
	}
	if down.causes()["502_worker_unreachable"] > 2*cbThreshold*len(workers) {
		t.Errorf("too many 502s while down: %v", down.causes())
	}

	StartMocks(t, 1, "--port", portOf(t, a.URLs[0]))
	StartMocks(t, 1, "--port", portOf(t, b.URLs[0]))
	testutil.Eventually(t, "service resumed", func() bool {
		cs := cause(send(client, url, faultChat, nil))
		c.count(cs)
		return cs == ""
	})
	for range 50 {
		cs := cause(send(client, url, faultChat, nil))
		c.count(cs)
		if cs != "" {
			t.Fatalf("after the workers returned: %q", cs)
		}
	}
	t.Logf("502 before the first 503: %d; under load while down: %v", before503, down.causes())
	finishScenario(t, "all_workers_down_then_back", c, client, g, idle, workers)
}

// startGatewayAt runs smg on fixed ports (a restarted gateway keeps its address, as behind a
// load balancer) and waits until it is ready.
func startGatewayAt(t *testing.T, port, prom int, args ...string) *Gateway {
	t.Helper()
	all := append([]string{"launch", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--prometheus-host", "127.0.0.1", "--prometheus-port", strconv.Itoa(prom)}, args...)
	g := &Gateway{Process: Start(t, Build(t).SMG, all...),
		URL: fmt.Sprintf("http://127.0.0.1:%d", port), MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", prom)}
	g.WaitReady(t)
	return g
}

// balancer is what a load balancer in front of several gateways does: it watches their
// /readiness and sends each request to a ready one, and fails over to another when a gateway
// refuses the connection or answers 503 draining. Failovers are not failures.
type balancer struct {
	gateways  []*atomic.Pointer[Gateway]
	ready     []atomic.Bool
	next      atomic.Uint64
	failovers *tally
	client    *http.Client
	probe     *http.Client
}

func newBalancer(gws ...*Gateway) *balancer {
	b := &balancer{gateways: make([]*atomic.Pointer[Gateway], len(gws)), ready: make([]atomic.Bool, len(gws)),
		failovers: newTally(), client: newLoadClient(), probe: &http.Client{Timeout: time.Second}}
	for i, g := range gws {
		b.gateways[i] = &atomic.Pointer[Gateway]{}
		b.gateways[i].Store(g)
		b.ready[i].Store(true)
	}
	return b
}

// watch polls every gateway's /readiness every 20 ms until ctx ends.
func (b *balancer) watch(ctx context.Context) {
	for i := range b.gateways {
		go func() {
			for ctx.Err() == nil {
				r, err := b.probe.Get(b.gateways[i].Load().URL + "/readiness")
				ok := err == nil && r.StatusCode == 200
				if err == nil {
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
				}
				b.ready[i].Store(ok)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
}

// do sends one request through the balancer and returns its final cause ("" on success).
// The Idempotency-Key header lets Go's transport resend a request on a fresh connection when
// the gateway closed the reused keep-alive connection before reading it, which is what a
// load balancer does too: that request never reached the gateway.
func (b *balancer) do(body string, stream bool) string {
	hdr := map[string]string{"Idempotency-Key": "lb"}
	for try := 0; try < 200; try++ {
		i := int(b.next.Add(1)) % len(b.gateways)
		for k := 0; k < len(b.gateways) && !b.ready[i].Load(); k++ {
			i = (i + 1) % len(b.gateways)
		}
		url := b.gateways[i].Load().URL + "/v1/chat/completions"
		var cs string
		if stream {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "lb")
			resp, err := b.client.Do(req)
			if err != nil {
				cs = transportCause(err)
			} else {
				cs = streamOutcome(resp)
			}
		} else {
			cs = cause(send(b.client, url, body, hdr))
		}
		if cs == "refused" || cs == "503_draining" {
			b.failovers.count(cs)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		return cs
	}
	return "no_gateway_accepted"
}

// Rolling SIGTERM of two gateways under load: each drains (readiness 503, in-flight requests
// and streams finish) and exits 0, is restarted, then the other; a client that fails over like
// a load balancer loses nothing.
func TestFaultRollingSIGTERMOfGatewaysLosesNothing(t *testing.T) {
	t.Parallel()
	m := StartMocks(t, 3, "--output-tokens", "20", "--token-interval-ms", "10")
	args := gatewayArgs(m.URLs, "--drain-settle-secs", "1", "--shutdown-grace-period-secs", "10")
	ports := [2][2]int{}
	gws := make([]*Gateway, 2)
	for i := range gws {
		ports[i] = [2]int{FreePort(t, "127.0.0.1"), FreePort(t, "127.0.0.1")}
		gws[i] = startGatewayAt(t, ports[i][0], ports[i][1], args...)
	}
	idle := [2]float64{goroutines(t, gws[0]), goroutines(t, gws[1])}
	b := newBalancer(gws...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.watch(ctx)
	c := newTally()
	l := startLoad(8, func(i int) {
		c.count(b.do(map[bool]string{false: faultChat, true: faultChatStream}[i%3 == 0], i%3 == 0))
	})

	for i := range gws {
		time.Sleep(500 * time.Millisecond)
		if err := gws[i].Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := gws[i].Wait(20 * time.Second); code != 0 {
			t.Fatalf("gateway %d exited %d after SIGTERM", i, code)
		}
		gws[i] = startGatewayAt(t, ports[i][0], ports[i][1], args...)
		b.gateways[i].Store(gws[i])
	}
	time.Sleep(500 * time.Millisecond)
	l.finish()
	cancel()

	t.Logf("failovers: %v", b.failovers.causes())
	if c.failures() != 0 {
		t.Errorf("requests lost during the rolling restart: %v", c.causes())
	}
	b.client.CloseIdleConnections()
	b.probe.CloseIdleConnections()
	var leaks int64
	for _, g := range gws {
		leaks += inFlightLeaks(t, g.MetricsURL, m.URLs)
	}
	c.report(t, "rolling_sigterm_of_gateways", leaks)
	if leaks != 0 {
		t.Errorf("in-flight leak: %d", leaks)
	}
	for i, g := range gws {
		settleGoroutines(t, g, idle[i], len(m.URLs))
	}
}
