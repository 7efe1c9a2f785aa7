package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// The gateway against an attacker and a careless operator. Each test is the attack
// as the issue describes it, against real smg and mockworker processes on loopback.

// procStatusKB reads a "Vm..." line of /proc/<pid>/status in KiB.
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc on this system: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// stalledBodyRSSBoundMiB bounds the gateway's peak RSS while 300 clients each declare a
// 10 MB body and send 10 bytes of it (docs/reliability.md). Before the fix the same attack
// took the RSS to 4.96 GB; now each connection costs its read buffer (--max-header-size,
// 64 KiB), fasthttp's first read of the body (8 KiB) and a goroutine.
const stalledBodyRSSBoundMiB = 160

// TestStalledBodiesDoNotReserveTheirDeclaredLength: 300 connections each declaring 10 MB and
// sending 10 bytes, and one declaring 500,000,000 bytes, keep the gateway's peak RSS under
// stalledBodyRSSBoundMiB while normal requests keep working.
func TestStalledBodiesDoNotReserveTheirDeclaredLength(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	pid := g.Cmd.Process.Pid
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	before := procStatusKB(t, pid, "VmRSS")

	addr := strings.TrimPrefix(g.URL, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	attack := func(declared int) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"model\":\"", addr, declared)
	}
	for range 300 {
		attack(10_000_000)
	}
	attack(500_000_000)

	// Normal requests are served while the 301 connections stall.
	for i := range 20 {
		if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
			t.Fatalf("request %d during the attack: %d %s", i, r.Status, r.Body)
		}
	}
	// The stalled clients are still connected and unanswered: the gateway waits for their
	// bodies (until --read-timeout), it has not simply dropped them.
	for _, c := range conns[:5] {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := bufio.NewReader(c).ReadByte(); err == nil {
			t.Fatal("a stalled client got an answer before sending its body")
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("a stalled connection was closed: %v", err)
		}
	}
	peak := procStatusKB(t, pid, "VmHWM")
	t.Logf("HOSTILE attack=stalled_bodies conns=301 rss_before_kib=%d peak_rss_kib=%d bound_mib=%d", before, peak, stalledBodyRSSBoundMiB)
	if peak > stalledBodyRSSBoundMiB<<10 {
		t.Fatalf("peak RSS %d MiB with 301 stalled bodies, bound %d MiB", peak>>10, stalledBodyRSSBoundMiB)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
		t.Fatalf("after: %d %s", r.Status, r.Body)
	}
}

// TestLargeHeadersPassAndHugeOnesGet431: a 40 KB header (a large JWT, cookies) reaches the
// worker; past --max-header-size the answer is 431 with the gateway's envelope.
func TestLargeHeadersPassAndHugeOnesGet431(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	jwt := "Bearer " + strings.Repeat("J", 40_000)
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, map[string]string{"Authorization": jwt}); r.Status != 200 {
		t.Fatalf("40 KB Authorization: %d %s", r.Status, r.Body)
	}
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, map[string]string{"Cookie": strings.Repeat("c", 70_000)})
	if r.Status != 431 || r.Header.Get("X-Smg-Error-Code") != "header_too_large" {
		t.Fatalf("70 KB Cookie: %d %s", r.Status, r.Body)
	}
	// The flag moves the limit.
	g2 := StartGateway(t, "--worker-urls", m.URLs[0], "--max-header-size", "8192")
	if r := MustDo(t, "POST", g2.URL+"/v1/chat/completions", chat, map[string]string{"Cookie": strings.Repeat("c", 10_000)}); r.Status != 431 {
		t.Fatalf("10 KB Cookie past --max-header-size 8192: %d %s", r.Status, r.Body)
	}
}

// TestRefusalSurvivesTheClientStillSending: a request refused before the gateway read all of
// it (431 for the header block, 413 for the body) reaches an ordinary HTTP client as that
// answer, not as "connection reset": the gateway drains the unread input before it closes. A
// close with unread input makes the kernel send a reset, which fails the client's write of
// the rest of its request and, with it, the request (this test's 70 KB-cookie case used to
// fail now and then; with a body of megabytes behind the head it fails every time).
func TestRefusalSurvivesTheClientStillSending(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0], "--max-payload-size", "100000")
	body := `{"model":"m","prompt":"` + strings.Repeat("b", 6<<20) + `"}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"70 KB cookie", map[string]string{"Cookie": strings.Repeat("c", 70_000)}, 431},
		{"6 MB body past --max-payload-size", nil, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Do("POST", g.URL+"/v1/completions", body, tc.header)
			if err != nil || r.Status != tc.want {
				t.Fatalf("got %v, error %v; want %d", r, err, tc.want)
			}
		})
	}
}

// rawExchange sends raw bytes on a new connection to the gateway and returns everything it
// answers until it closes the connection or 2 s pass.
func rawExchange(t *testing.T, gatewayURL, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(gatewayURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var out strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
	}
}

// TestNoSecretOnOpenPortsOrInLogs: the --api-key does not appear on /debug/pprof/cmdline of
// the (unauthenticated) metrics port, client credentials do not appear in the debug log nor
// in the 400 answer to a malformed request, and the key can come from a file or $SMG_API_KEY.
func TestNoSecretOnOpenPortsOrInLogs(t *testing.T) {
	const adminKey, clientKey = "sk-admin-d41d8cd98f", "sk-client-9e107d9d37"
	m := StartMocks(t, 1)
	g := StartGateway(t, "--worker-urls", m.URLs[0], "--api-key", adminKey, "--log-level", "debug")
	cmdline := MustDo(t, "GET", strings.TrimSuffix(g.MetricsURL, "/metrics")+"/debug/pprof/cmdline", "", nil)
	if cmdline.Status != 200 || !strings.Contains(cmdline.Body, "--api-key\x00REDACTED") || strings.Contains(cmdline.Body, adminKey) {
		t.Fatalf("/debug/pprof/cmdline: %d %q", cmdline.Status, cmdline.Body)
	}
	bearer := map[string]string{"Authorization": "Bearer " + clientKey}
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, bearer); r.Status != 200 {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "GET", g.URL+"/workers", "", bearer); r.Status != 401 {
		t.Fatalf("/workers with the wrong key: %d", r.Status)
	}
	if r := MustDo(t, "GET", g.URL+"/workers", "", map[string]string{"Authorization": "Bearer " + adminKey}); r.Status != 200 {
		t.Fatalf("/workers with the key: %d", r.Status)
	}
	// Malformed requests carrying credentials: a bad Content-Length, a header line without a
	// colon, a header block past the limit.
	for _, raw := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Length: nope\r\n\r\n{}",
		"POST /workers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + adminKey + "\r\nbroken header line\r\n\r\n",
		"GET /workers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + adminKey + "\r\nCookie: " + strings.Repeat("c", 70_000) + "\r\n\r\n",
	} {
		answer := rawExchange(t, g.URL, raw)
		if !strings.HasPrefix(answer, "HTTP/1.1 4") {
			t.Fatalf("malformed request answered %.200q", answer)
		}
		if strings.Contains(answer, clientKey) || strings.Contains(answer, adminKey) {
			t.Fatalf("the answer to a malformed request quotes a credential: %.400q", answer)
		}
	}
	if r := MustDo(t, "GET", g.URL+"/health", "", nil); r.Status != 200 {
		t.Fatal(r.Status)
	}
	logs := g.Output()
	if !strings.Contains(logs, "level=DEBUG") {
		t.Fatalf("no debug lines logged; the check below would prove nothing:\n%s", logs)
	}
	for _, secret := range []string{adminKey, clientKey} {
		if i := strings.Index(logs, secret); i >= 0 {
			t.Fatalf("the log holds a credential: %q", logs[max(0, i-300):i+len(secret)])
		}
	}

	// The key from a file, then from the environment.
	file := t.TempDir() + "/key"
	if err := os.WriteFile(file, []byte(adminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, gw := range []*Gateway{
		StartGateway(t, "--worker-urls", m.URLs[0], "--api-key-file", file),
		startGatewayEnv(t, []string{"SMG_API_KEY=" + adminKey}, "--worker-urls", m.URLs[0]),
	} {
		if r := MustDo(t, "GET", gw.URL+"/workers", "", nil); r.Status != 401 {
			t.Fatalf("/workers without the key: %d", r.Status)
		}
		if r := MustDo(t, "GET", gw.URL+"/workers", "", map[string]string{"Authorization": "Bearer " + adminKey}); r.Status != 200 {
			t.Fatalf("/workers with the key: %d", r.Status)
		}
		body := MustDo(t, "GET", strings.TrimSuffix(gw.MetricsURL, "/metrics")+"/debug/pprof/cmdline", "", nil).Body
		if strings.Contains(body, adminKey) {
			t.Fatalf("cmdline %q", body)
		}
	}
}

// TestForwardingLoopsAreRefused: a gateway refuses its own address as a worker, and two
// gateways registered as each other's worker (consistent_hashing, as in the issue) answer
// 508 forwarding_loop after one round instead of hopping until connections run out.
func TestForwardingLoopsAreRefused(t *testing.T) {
	a := StartGateway(t, "--policy", "consistent_hashing")
	port := a.URL[strings.LastIndexByte(a.URL, ':')+1:]
	for _, self := range []string{a.URL, "http://localhost:" + port} {
		r := MustDo(t, "POST", a.URL+"/workers", `{"url":"`+self+`"}`, nil)
		if r.Status != 400 || !strings.Contains(r.Body, "WORKER_IS_GATEWAY") {
			t.Fatalf("registering %s with itself: %d %s", self, r.Status, r.Body)
		}
	}
	if code := Start(t, Build(t).SMG, "--host", "127.0.0.1", "--port", port, "--worker-urls", "http://localhost:"+port).Wait(10 * time.Second); code != 2 {
		t.Fatalf("--worker-urls naming the gateway itself: exit %d, want 2", code)
	}

	b := StartGateway(t, "--policy", "consistent_hashing")
	for _, pair := range [][2]*Gateway{{a, b}, {b, a}} {
		if r := MustDo(t, "POST", pair[0].URL+"/workers", `{"url":"`+pair[1].URL+`"}`, nil); r.Status != 202 {
			t.Fatalf("register: %d %s", r.Status, r.Body)
		}
	}
	a.WaitReady(t)
	b.WaitReady(t)
	for i := range 2 {
		r := MustDo(t, "POST", a.URL+"/v1/chat/completions", chat, map[string]string{"X-SMG-Routing-Key": fmt.Sprint("user-", i)})
		if r.Status != 508 || r.Header.Get("X-Smg-Error-Code") != "forwarding_loop" {
			t.Fatalf("request %d around the loop: %d %s", i, r.Status, r.Body)
		}
	}
	// Each client request went a → b → a and stopped: a answered it twice (the loop-back
	// with 508, then the client with b's 508), b once.
	for _, c := range []struct {
		g    *Gateway
		want float64
	}{{a, 4}, {b, 2}} {
		testutil.Eventually(t, "in-flight 0 on both gateways", func() bool { return totalInFlight(t, c.g) == 0 })
		if v, ok := Metric(t, c.g.MetricsURL, `smg_http_requests_total{path="/v1/chat/completions",status_code="other"}`); !ok || v != c.want {
			t.Fatalf("%s answered %v chat requests with 508, want %v (one per hop)", c.g.URL, v, c.want)
		}
	}
}

// TestWorkerCapAndNoGoroutinePerWorker: registrations past --max-workers get 409
// WORKER_LIMIT_REACHED, and 300 healthy, probed workers do not cost the gateway a goroutine
// each (the issue counted 2 per worker: idle-connection cleaners of the probe and model
// discovery connections).
func TestWorkerCapAndNoGoroutinePerWorker(t *testing.T) {
	const n = 300
	m := StartMocks(t, n)
	g := StartGateway(t, "--max-workers", strconv.Itoa(n), "--health-check-interval-secs", "2")
	idle, ok := Metric(t, g.MetricsURL, "go_goroutines")
	if !ok {
		t.Fatal("no go_goroutines")
	}
	for i, u := range m.URLs {
		if r := MustDo(t, "POST", g.URL+"/workers", `{"url":"`+u+`"}`, nil); r.Status != 202 {
			t.Fatalf("worker %d: %d %s", i, r.Status, r.Body)
		}
	}
	r := MustDo(t, "POST", g.URL+"/workers", `{"url":"http://127.0.0.1:1"}`, nil)
	if r.Status != 409 || !strings.Contains(r.Body, "WORKER_LIMIT_REACHED") || !strings.Contains(r.Body, "--max-workers") {
		t.Fatalf("worker %d past --max-workers %d: %d %s", n+1, n, r.Status, r.Body)
	}
	testutil.Eventually(t, "all workers healthy", func() bool {
		var body struct {
			Healthy int `json:"healthy_workers"`
		}
		r, err := Do("GET", g.URL+"/readiness", "", nil)
		return err == nil && json.Unmarshal([]byte(r.Body), &body) == nil && body.Healthy == n
	})
	// Probed again at least once (2 s interval), so a kept connection would be in place.
	time.Sleep(3 * time.Second)
	bound := idle + 80 // the health checker's round (at most 64 probes) and the scrape
	var now float64
	testutil.Eventually(t, fmt.Sprintf("go_goroutines at most %v with %d workers (idle %v)", bound, n, idle), func() bool {
		now, _ = Metric(t, g.MetricsURL, "go_goroutines")
		return now <= bound
	})
	t.Logf("HOSTILE attack=many_workers workers=%d goroutines_idle=%v goroutines_with_workers=%v bound=%v", n, idle, now, bound)
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
		t.Fatalf("chat with %d workers: %d %s", n, r.Status, r.Body)
	}
}

// TestDuplicateJSONKeysLastWinsInGatewayAndMocks: a body that repeats "stream" and
// "max_tokens" is read the same way by the gateway and the mock engine, the last occurrence
// winning as in Python's json module (SGLang, vLLM). Before, the mocks took the first: the
// gateway relayed a stream the engine answered as one JSON body.
func TestDuplicateJSONKeysLastWinsInGatewayAndMocks(t *testing.T) {
	m := StartMocks(t, 1, "--output-tokens", "50")
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	body := `{"model":"mock-model","stream":false,"max_tokens":1,"messages":[{"role":"user","content":"hello"}],"stream":true,"max_tokens":3}`
	resp, br := Stream(t, g.URL+"/v1/chat/completions", body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content-type %q: the engine did not take the last \"stream\"", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var content []string
	for {
		ev, err := ReadEvent(br)
		if err != nil {
			t.Fatalf("after %d events: %v", len(content), err)
		}
		if ev == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev), &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			content = append(content, chunk.Choices[0].Delta.Content)
		}
	}
	if len(content) != 3 {
		t.Fatalf("%d content events, want 3 (the last max_tokens): %q", len(content), content)
	}
	// Non-streamed, the usage says which max_tokens the engine took.
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", `{"model":"mock-model","max_tokens":1,"messages":[{"role":"user","content":"hello"}],"max_tokens":4}`, nil)
	var answer struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &answer) != nil || answer.Usage.CompletionTokens != 4 {
		t.Fatalf("non-streamed: %d %s: want 4 completion tokens (the last max_tokens)", r.Status, r.Body)
	}
}

// workersWithKey lists the worker URLs of a gateway whose worker API needs key.
func workersWithKey(t *testing.T, g *Gateway, key string) []string {
	t.Helper()
	r := MustDo(t, "GET", g.URL+"/workers", "", map[string]string{"Authorization": "Bearer " + key})
	var l workerList
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &l) != nil {
		t.Fatalf("GET /workers: %d %s", r.Status, r.Body)
	}
	var urls []string
	for _, w := range l.Workers {
		urls = append(urls, w.URL)
	}
	return urls
}

// TestPlaintextMeshCannotBypassTheAPIKey: a router that joins a plaintext mesh without any
// key publishes a worker; a peer protected by --api-key refuses the publication (it would
// bypass the key), while a peer with --mesh-allow-insecure imports it as the spec's product
// does.
func TestPlaintextMeshCannotBypassTheAPIKey(t *testing.T) {
	const key = "sk-mesh-5eb63bbbe0"
	m := StartMocks(t, 1)
	intruder := startMeshRouter(t, meshRouterConfig{name: "intruder", host: "127.0.0.1"})
	guarded := startMeshRouter(t, meshRouterConfig{name: "guarded", host: "127.0.0.1", peers: []string{intruder.meshAddr}, extra: []string{"--api-key", key}})
	open := startMeshRouter(t, meshRouterConfig{name: "insecure-ok", host: "127.0.0.1", peers: []string{intruder.meshAddr}, extra: []string{"--api-key", key, "--mesh-allow-insecure"}})
	logStatusOnFailure(t, intruder)
	within(t, "the intruder sees both routers ALIVE", func() bool { return intruder.sees("ALIVE", guarded, open) })

	intruder.addWorker(m.URLs[0])
	within(t, "the --mesh-allow-insecure router imports the intruder's worker", func() bool {
		return slices.Contains(workersWithKey(t, open.Gateway, key), m.URLs[0])
	})
	within(t, "the guarded router logs the refusal", func() bool {
		return strings.Contains(guarded.Output(), "refused a peer's worker") && strings.Contains(guarded.Output(), m.URLs[0])
	})
	if urls := workersWithKey(t, guarded.Gateway, key); len(urls) != 0 {
		t.Fatalf("the guarded router imported %v", urls)
	}
	if r := MustDo(t, "POST", guarded.URL+"/v1/chat/completions", chat, nil); r.Status != 404 || !strings.Contains(r.Body, "model_not_found") {
		t.Fatalf("the guarded router routed through the intruder's worker: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(guarded.Output(), "--mesh-allow-insecure") {
		t.Fatal("the guarded router did not say at start-up how to accept peers' workers")
	}
}

// TestAbandonedRequestsToABlackHoleWorkerEnd: four clients (two streamed, two not) wait on a
// worker that never answers and give up. The gateway notices each client leaving while it
// waits for the worker's first byte, closes the worker's connection and frees the request:
// the worker's in-flight count goes back to 0. Before, it stayed held until
// --request-timeout-secs (1800 s by default).
func TestAbandonedRequestsToABlackHoleWorkerEnd(t *testing.T) {
	m := StartMocks(t, 1)
	blackHole(t, m.URLs[0])
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	abandonAll(t, g, m.URLs)
}

// TestAbandonedPDRequestsEnd: the same in PD mode (SGLang's handover), both legs black
// holes: the clients that give up end both legs of their requests at once, neither worker
// is blamed.
func TestAbandonedPDRequestsEnd(t *testing.T) {
	p := startPDMock(t, "127.0.0.41", "prefill", "sglang", 1, FreePort(t, "127.0.0.41"))
	d := startPDMock(t, "127.0.0.42", "decode", "sglang", 1, p.bootstrapPort)
	blackHole(t, p.URLs[0])
	blackHole(t, d.URLs[0])
	g := StartGateway(t, "--pd-disaggregation", "--prefill", p.URLs[0], strconv.Itoa(p.bootstrapPort), "--decode", d.URLs[0])
	abandonAll(t, g, []string{p.URLs[0], d.URLs[0]})
}

// blackHole makes the mock at url hold every generation answer for ten minutes.
func blackHole(t *testing.T, url string) {
	t.Helper()
	if r := MustDo(t, "POST", url+"/admin/config", `{"delay_ms":600000}`, nil); r.Status != 200 {
		t.Fatalf("admin/config: %d %s", r.Status, r.Body)
	}
}

// abandonAll sends four requests (two streamed, two not) that wait on black-hole workers,
// makes their clients give up, and checks that the gateway holds nothing on the workers any
// more and blamed none of them (breaker closed, no upstream error).
func abandonAll(t *testing.T, g *Gateway, workers []string) {
	t.Helper()
	active := func() (sum float64, ok bool) {
		for _, u := range workers {
			v, found := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, u))
			sum, ok = sum+v, found
		}
		return sum, ok
	}
	// The clients give up once the gateway holds all four on each worker (not after a fixed
	// time: on a busy machine a timeout could end them before the gateway counted them).
	giveUp, leave := context.WithCancel(context.Background())
	defer leave()
	var wg sync.WaitGroup
	for _, body := range []string{chat, chat, chatStream, chatStream} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(giveUp, "POST", g.URL+"/v1/chat/completions", strings.NewReader(body))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("the black hole answered: %d", resp.StatusCode)
			}
		}()
	}
	testutil.Eventually(t, "4 requests in flight on each black hole", func() bool {
		v, _ := active()
		return v == float64(4*len(workers))
	})
	left := time.Now()
	leave()
	wg.Wait() // the 4 clients gave up
	testutil.Eventually(t, "in-flight back to 0 once the clients left", func() bool {
		v, ok := active()
		return ok && v == 0
	})
	// The issue asks for "back to 0 within a second"; tests assert no time (a shared machine),
	// so the time is logged and quoted in docs/reliability.md. It includes the metrics polls.
	t.Logf("HOSTILE attack=abandoned_requests workers=%d in_flight_zero_after_ms=%d", len(workers), time.Since(left).Milliseconds())
	// The workers were not blamed: their breakers are closed, no upstream error counted.
	for _, u := range workers {
		if v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_cb_state{worker=%q}`, u)); v != 0 {
			t.Fatalf("the breaker of %s is %v after clients left it, want 0 (closed)", u, v)
		}
		if v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_router_upstream_responses_total{worker=%q,outcome="error"}`, u)); v != 0 {
			t.Fatalf("%v upstream errors counted against %s after clients left it", v, u)
		}
	}
}

// TestStoppedWorkerStopsGettingWorkBeforeHealthChecksNotice: under cache_aware, a worker
// that is SIGSTOPped while it holds the requests' prefix attracted every request until the
// health checker marked it. With --first-byte-timeout-secs each request it holds is cut and
// retried on the other worker, the cuts open its breaker, and from then on it gets no work,
// while the health checker (60 s interval) still lists it healthy.
func TestStoppedWorkerStopsGettingWorkBeforeHealthChecksNotice(t *testing.T) {
	m1, m2 := StartMocks(t, 1), StartMocks(t, 1)
	g := StartGateway(t, "--policy", "cache_aware", "--worker-urls", m1.URLs[0], m2.URLs[0],
		"--first-byte-timeout-secs", "2", "--cb-failure-threshold", "3", "--cb-timeout-duration-secs", "600")
	body := `{"model":"mock-model","messages":[{"role":"user","content":"the same long prefix for every request of this test"}]}`
	r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, nil)
	if r.Status != 200 {
		t.Fatalf("warm-up: %d %s", r.Status, r.Body)
	}
	holder := r.Header.Get("X-Smg-Routed-Worker-Id")
	stopped, other := m1, m2
	if holder == m2.URLs[0] {
		stopped, other = m2, m1
	}
	stopProcess(t, stopped.Process)
	t.Cleanup(func() { _ = stopped.Signal(syscall.SIGCONT) })

	send := func(n int) []*Response { return sendAtOnce(g, body, n) }
	// 16 requests at once: those sent to the stopped worker are cut at the first-byte timeout
	// and served by the other one.
	for i, r := range send(16) {
		if r == nil || r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") != other.URLs[0] {
			t.Fatalf("request %d while the worker is stopped: %+v", i, r)
		}
	}
	if v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_cb_state{worker=%q}`, stopped.URLs[0])); v != 1 {
		t.Fatalf("the stopped worker's breaker is %v, want 1 (open)", v)
	}
	// From now on the stopped worker gets nothing: no new request is in flight on it.
	series := fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, stopped.URLs[0])
	testutil.Eventually(t, "nothing in flight on the stopped worker", func() bool {
		v, _ := Metric(t, g.MetricsURL, series)
		return v == 0
	})
	for i, r := range send(16) {
		if r == nil || r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") != other.URLs[0] {
			t.Fatalf("request %d after the breaker opened: %+v", i, r)
		}
	}
	if v, _ := Metric(t, g.MetricsURL, series); v != 0 {
		t.Fatalf("%v requests in flight on the stopped worker after its breaker opened", v)
	}
	// The health checker has not marked it: the gateway stopped sending it work on its own.
	if status, _ := listedWorker(t, g, stopped.URLs[0]); status != "ready" {
		t.Fatalf("the health checker marked the stopped worker %s already; the test proves nothing", status)
	}
}

// stopProcess sends SIGSTOP to p and waits until the kernel shows it stopped: the signal is
// delivered asynchronously, and a worker still running for a moment answers a request.
func stopProcess(t *testing.T, p *Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the process stopped", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
		if err != nil {
			t.Skipf("no /proc on this system: %v", err)
		}
		_, after, _ := strings.Cut(string(b[strings.LastIndexByte(string(b), ')'):]), " ")
		return strings.HasPrefix(after, "T")
	})
}

// stallLines returns worker/stall's log lines from a gateway's output.
func stallLines(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "answer") && strings.Contains(line, "Worker") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// sendAtOnce sends n copies of a chat request to g at once and returns the answers (nil for
// a transport error).
func sendAtOnce(g *Gateway, body string, n int) []*Response {
	out := make([]*Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); out[i], _ = Do("POST", g.URL+"/v1/chat/completions", body, nil) }()
	}
	wg.Wait()
	return out
}

// listedWorker returns the status and is_healthy of the worker url in GET /workers.
func listedWorker(t *testing.T, g *Gateway, url string) (string, bool) {
	t.Helper()
	var listed struct {
		Workers []struct {
			URL       string `json:"url"`
			IsHealthy bool   `json:"is_healthy"`
			Status    string `json:"status"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(MustDo(t, "GET", g.URL+"/workers", "", nil).Body), &listed); err != nil {
		t.Fatal(err)
	}
	for _, w := range listed.Workers {
		if w.URL == url {
			return w.Status, w.IsHealthy
		}
	}
	t.Fatalf("worker %s left the registry", url)
	return "", false
}

// upstreamAnswers sums smg_router_upstream_responses_total of the worker url: every request
// dispatched to it and settled (answered, failed or cut) counts once.
func upstreamAnswers(t *testing.T, g *Gateway, url string) float64 {
	t.Helper()
	sum := 0.0
	for _, outcome := range []string{"2xx", "3xx", "4xx", "5xx", "error"} {
		v, _ := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_router_upstream_responses_total{worker=%q,outcome=%q}`, url, outcome))
		sum += v
	}
	return sum
}

// TestStoppedWorkerGetsNoWorkAtDefaultSettings (without
// --first-byte-timeout-secs): under cache_aware, the worker holding the requests' prefix is
// SIGSTOPped and 16 clients send at once. The requests it attracted wait without a first
// byte; worker/stall finds it silent (no new requests) and, its probe unanswered,
// unresponsive: the waiting requests are cut and retried on the other worker, so every
// client gets its answer from the other worker. The next 16 requests all avoid it, while the
// health checker still lists it ready. With the breaker disabled too, the stall signal alone
// keeps the work away; after SIGCONT the worker is routable again.
func TestStoppedWorkerGetsNoWorkAtDefaultSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{{"defaults", nil}, {"breaker-disabled", []string{"--disable-circuit-breaker"}}} {
		t.Run(tc.name, func(t *testing.T) {
			m1, m2 := StartMocks(t, 1), StartMocks(t, 1)
			g := StartGateway(t, append([]string{"--policy", "cache_aware", "--worker-urls", m1.URLs[0], m2.URLs[0]}, tc.args...)...)
			body := `{"model":"mock-model","messages":[{"role":"user","content":"the same long prefix for every request of this test"}]}`
			r := MustDo(t, "POST", g.URL+"/v1/chat/completions", body, nil)
			if r.Status != 200 {
				t.Fatalf("warm-up: %d %s", r.Status, r.Body)
			}
			stopped, other := m1, m2
			if r.Header.Get("X-Smg-Routed-Worker-Id") == m2.URLs[0] {
				stopped, other = m2, m1
			}
			before := upstreamAnswers(t, g, stopped.URLs[0])
			stopProcess(t, stopped.Process)
			resumed := false
			t.Cleanup(func() {
				if !resumed {
					_ = stopped.Signal(syscall.SIGCONT)
				}
			})

			start := time.Now()
			for i, r := range sendAtOnce(g, body, 16) {
				if r == nil || r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") != other.URLs[0] {
					t.Fatalf("request %d while the worker is stopped: %+v", i, r)
				}
			}
			// Timing is reported, not asserted (docs/reliability.md quotes it).
			t.Logf("the 16 requests sent while the worker was stopped took %v; the gateway's stall log:\n%s",
				time.Since(start).Round(time.Millisecond), stallLines(g.Output()))
			active := fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, stopped.URLs[0])
			if v, _ := Metric(t, g.MetricsURL, active); v != 0 {
				t.Fatalf("%v requests still in flight on the stopped worker after every client got its answer", v)
			}
			cut := upstreamAnswers(t, g, stopped.URLs[0]) - before
			if cut < 1 {
				t.Fatal("no request went to the stopped worker: the test proves nothing")
			}
			if v, _ := Metric(t, g.MetricsURL, `smg_worker_stalls_total{state="unresponsive"}`); v != 1 {
				t.Fatalf("smg_worker_stalls_total{state=\"unresponsive\"} = %v, want 1", v)
			}
			t.Logf("%v requests went to the stopped worker and were cut, then served by the other", cut)

			// The signal has tripped: the next 16 requests all go to the other worker and the
			// stopped one gets none.
			for i, r := range sendAtOnce(g, body, 16) {
				if r == nil || r.Status != 200 || r.Header.Get("X-Smg-Routed-Worker-Id") != other.URLs[0] {
					t.Fatalf("request %d after the stall was found: %+v", i, r)
				}
			}
			if got := upstreamAnswers(t, g, stopped.URLs[0]) - before; got != cut {
				t.Fatalf("the stopped worker got %v more requests after the stall was found", got-cut)
			}
			if v, _ := Metric(t, g.MetricsURL, active); v != 0 {
				t.Fatalf("%v requests in flight on the stopped worker", v)
			}
			if status, healthy := listedWorker(t, g, stopped.URLs[0]); status != "ready" || healthy {
				t.Fatalf("stopped worker listed %s, is_healthy %v; want ready (the health checker has not noticed) and not healthy (no new work)", status, healthy)
			}
			if tc.args != nil {
				// Resumed, it answers the next probe and takes work again.
				if err := stopped.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				resumed = true
				testutil.Eventually(t, "the resumed worker is routable again", func() bool {
					_, healthy := listedWorker(t, g, stopped.URLs[0])
					return healthy
				})
			}
		})
	}
}
