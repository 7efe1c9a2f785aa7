package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

const chat = `{"model":"mock-model","messages":[{"role":"user","content":"hello"}]}`
const chatStream = `{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"hello"}]}`

type workerList struct {
	Workers []struct {
		ID     string `json:"id"`
		URL    string `json:"url"`
		Load   int64  `json:"load"`
		APIKey string `json:"api_key"`
	} `json:"workers"`
	Total int `json:"total"`
}

func listWorkers(t *testing.T, g *Gateway) workerList {
	t.Helper()
	r := MustDo(t, "GET", g.URL+"/workers", "", nil)
	var l workerList
	if err := json.Unmarshal([]byte(r.Body), &l); err != nil {
		t.Fatalf("GET /workers: %v: %s", err, r.Body)
	}
	return l
}

// totalInFlight reads smg_worker_requests_active for every worker through the worker API.
func totalInFlight(t *testing.T, g *Gateway) int64 {
	var n int64
	for _, w := range listWorkers(t, g).Workers {
		n += w.Load
	}
	return n
}

func TestRoundRobinSpreadsThirtyRequestsTenEach(t *testing.T) {
	m := StartMocks(t, 3)
	g := StartGateway(t, append([]string{"--policy", "round_robin", "--worker-urls"}, m.URLs...)...)
	counts := map[string]int{}
	for range 30 {
		r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil)
		if r.Status != 200 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		routed := r.Header.Get("X-Smg-Routed-Worker-Id")
		if served := "http://" + r.Header.Get("X-Mock-Worker-Id"); served != routed {
			t.Fatalf("routed to %s but served by %s", routed, served)
		}
		counts[routed]++
	}
	for _, u := range m.URLs {
		if counts[u] != 10 {
			t.Fatalf("counts %v, want 10 per worker", counts)
		}
	}
}

func TestStreamingArrivesAsEventsEndingInDone(t *testing.T) {
	m := StartMocks(t, 1, "--output-tokens", "8", "--token-interval-ms", "5")
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	resp, br := Stream(t, g.URL+"/v1/chat/completions", chatStream)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	for {
		ev, err := ReadEvent(br)
		if err != nil {
			t.Fatalf("after %d events: %v", len(events), err)
		}
		events = append(events, ev)
		if ev == "[DONE]" {
			break
		}
	}
	if len(events) < 9 || !strings.Contains(events[0], "chat.completion.chunk") {
		t.Fatalf("%d events: %v", len(events), events)
	}
	testutil.Eventually(t, "in-flight 0 after a finished stream", func() bool { return totalInFlight(t, g) == 0 })
}

func TestInFlightReturnsToZeroAfterEveryKindOfEnding(t *testing.T) {
	m := StartMocks(t, 1, "--output-tokens", "400", "--token-interval-ms", "20")
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	series := fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, m.URLs[0])

	if r := MustDo(t, "POST", g.URL+"/v1/completions", `{"model":"mock-model","prompt":"hi","max_tokens":1}`, nil); r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	if v, ok := Metric(t, g.MetricsURL, series); !ok || v != 0 {
		t.Fatalf("after a normal response %s = %v (%v)", series, v, ok)
	}

	// A client that hangs up mid-stream: the count is 1 while the stream runs, 0 after.
	resp, br := Stream(t, g.URL+"/v1/chat/completions", chatStream)
	if _, err := ReadEvent(br); err != nil {
		t.Fatal(err)
	}
	if v, _ := Metric(t, g.MetricsURL, series); v != 1 {
		t.Fatalf("mid-stream %s = %v, want 1", series, v)
	}
	resp.Body.Close()
	testutil.Eventually(t, "in-flight 0 after the client hung up", func() bool {
		v, _ := Metric(t, g.MetricsURL, series)
		return v == 0
	})
}

func TestWorkersComeAndGoWhileClientsSendNothingLost(t *testing.T) {
	m := StartMocks(t, 4)
	g := StartGateway(t, "--policy", "round_robin", "--worker-urls", m.URLs[0], "--drain-settle-secs", "0")
	var sent, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				r, err := Do("POST", g.URL+"/v1/chat/completions", chat, nil)
				if err != nil || r.Status != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%v %v", err, r))
				}
			}
		}()
	}
	for round := range 3 {
		var ids []string
		for _, u := range m.URLs[1:] {
			r := MustDo(t, "POST", g.URL+"/workers", `{"url":"`+u+`"}`, nil)
			var body struct {
				WorkerID string `json:"worker_id"`
			}
			_ = json.Unmarshal([]byte(r.Body), &body)
			if r.Status != 202 || r.Header.Get("Location") != "/workers/"+body.WorkerID {
				t.Fatalf("round %d add %s: %d %s", round, u, r.Status, r.Body)
			}
			ids = append(ids, body.WorkerID)
		}
		time.Sleep(200 * time.Millisecond)
		for _, id := range ids {
			if r := MustDo(t, "DELETE", g.URL+"/workers/"+id, "", nil); r.Status != 202 {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || sent.Load() < 100 {
		t.Fatalf("%d of %d requests failed (first: %v)", failed.Load(), sent.Load(), firstErr.Load())
	}
	t.Logf("%d requests while workers came and went, none failed", sent.Load())
	testutil.Eventually(t, "in-flight 0", func() bool { return totalInFlight(t, g) == 0 })
}

func TestWorkerAPI(t *testing.T) {
	m := StartMocks(t, 1)
	g := StartGateway(t, "--api-key", "sekret", "--drain-settle-secs", "1", "--health-check-interval-secs", "1")
	auth := map[string]string{"Authorization": "Bearer sekret"}
	if r := MustDo(t, "GET", g.URL+"/workers", "", nil); r.Status != 401 {
		t.Fatalf("without the key: %d", r.Status)
	}
	r := MustDo(t, "POST", g.URL+"/workers", `{"url":"`+m.URLs[0]+`","api_key":"worker-secret","labels":{"tier":"a"}}`, auth)
	if r.Status != 202 {
		t.Fatalf("add: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "POST", g.URL+"/workers", `{"url":"`+m.URLs[0]+`"}`, auth); r.Status != 409 || !strings.Contains(r.Body, `"code":"WORKER_ALREADY_EXISTS"`) {
		t.Fatalf("duplicate: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "POST", g.URL+"/workers", `{"url":"ftp://x"}`, auth); r.Status != 400 || !strings.Contains(r.Body, `"error"`) {
		t.Fatalf("bad URL: %d %s", r.Status, r.Body)
	}
	r = MustDo(t, "GET", g.URL+"/workers?model=mock-model", "", auth)
	if r.Status != 200 || strings.Contains(r.Body, "worker-secret") || !strings.Contains(r.Body, `"total":1`) || !strings.Contains(r.Body, `"stats"`) {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "GET", g.URL+"/workers?model=other", "", auth); !strings.Contains(r.Body, `"total":0`) {
		t.Fatalf("filtered list: %s", r.Body)
	}
	var l workerList
	_ = json.Unmarshal([]byte(r.Body), &l)
	id := l.Workers[0].ID
	if r := MustDo(t, "GET", g.URL+"/workers/"+id, "", auth); r.Status != 200 || !strings.Contains(r.Body, `"model_id":"mock-model"`) {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	// The worker is pending until its first health probe answers, then routable.
	g.WaitReady(t)
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 200 {
		t.Fatalf("routed: %d", r.Status)
	}
	// DELETE drains: the worker takes no new requests at once, and leaves after the settle
	// window (--drain-settle-secs 1 here).
	if r := MustDo(t, "DELETE", g.URL+"/workers/"+id, "", auth); r.Status != 202 {
		t.Fatalf("delete: %d", r.Status)
	}
	if r := MustDo(t, "GET", g.URL+"/workers/"+id, "", auth); r.Status != 200 || !strings.Contains(r.Body, `"status":"draining"`) {
		t.Fatalf("right after delete: %d %s", r.Status, r.Body)
	}
	if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chat, nil); r.Status != 503 {
		t.Fatalf("a draining worker got a new request: %d", r.Status)
	}
	testutil.Eventually(t, "the drained worker removed", func() bool {
		r := MustDo(t, "GET", g.URL+"/workers/"+id, "", auth)
		return r.Status == 404 && strings.Contains(r.Body, "WORKER_NOT_FOUND")
	})
}

type envelope struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func TestErrorCasesAnswerStatusAndEnvelope(t *testing.T) {
	m := StartMocks(t, 1)
	dead := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t, "127.0.0.1"))
	g := StartGateway(t, "--worker-urls", m.URLs[0], "--max-payload-size", "2048", "--request-timeout-secs", "1")
	empty := StartGateway(t)
	deadGW := StartGateway(t, "--worker-urls", dead, "--disable-health-check")

	cases := []struct {
		name, method, url, body string
		header                  map[string]string
		status                  int
		code                    string
	}{
		{"malformed JSON", "POST", g.URL + "/v1/chat/completions", `{"model":`, nil, 400, "invalid_request"},
		{"body too large", "POST", g.URL + "/v1/completions", `{"prompt":"` + strings.Repeat("a", 4096) + `"}`, nil, 413, "payload_too_large"},
		{"unknown model", "POST", g.URL + "/v1/chat/completions", `{"model":"nope","messages":[]}`, nil, 404, "model_not_found"},
		{"no available worker", "POST", empty.URL + "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, nil, 503, "no_available_workers"},
		{"worker unreachable", "POST", deadGW.URL + "/v1/chat/completions", chat, nil, 502, "worker_unreachable"},
		{"worker timeout", "POST", g.URL + "/v1/chat/completions", chat, map[string]string{"x-mock-fault": "hang"}, 504, "worker_timeout"},
		{"unknown path", "GET", g.URL + "/v1/nothing", "", nil, 404, "not_found"},
		{"wrong method", "GET", g.URL + "/generate", "", nil, 405, "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := MustDo(t, tc.method, tc.url, tc.body, tc.header)
			var e envelope
			if err := json.Unmarshal([]byte(r.Body), &e); err != nil {
				t.Fatalf("not an envelope: %s", r.Body)
			}
			if r.Status != tc.status || e.Error.Code != tc.code || r.Header.Get("X-SMG-Error-Code") != tc.code || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("got %d %s (header %q), want %d %s", r.Status, r.Body, r.Header.Get("X-SMG-Error-Code"), tc.status, tc.code)
			}
		})
	}
	testutil.Eventually(t, "in-flight 0", func() bool { return totalInFlight(t, g) == 0 && totalInFlight(t, deadGW) == 0 })
}

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	b := Build(t)
	for _, tc := range []struct{ args, want string }{
		{"launch --port abc", "--port"},
		{"launch --policy nope", "--policy"},
		{"launch --worker-urls ftp://x", "--worker-urls"},
		{"launch --bogus", "unknown flag --bogus"},
	} {
		p := Start(t, b.SMG, strings.Fields(tc.args)...)
		if code := p.Wait(10 * time.Second); code != 2 || !strings.Contains(p.Output(), tc.want) {
			t.Errorf("%s: exit %d, output %q", tc.args, code, p.Output())
		}
	}
}

func TestSIGTERMDrainsThenExits(t *testing.T) {
	m := StartMocks(t, 1, "--output-tokens", "30", "--token-interval-ms", "20")
	g := StartGateway(t, "--worker-urls", m.URLs[0])
	resp, br := Stream(t, g.URL+"/v1/chat/completions", chatStream)
	defer resp.Body.Close()
	if _, err := ReadEvent(br); err != nil {
		t.Fatal(err)
	}
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The stream in flight finishes whole.
	n := 1
	for {
		ev, err := ReadEvent(br)
		if err != nil {
			t.Fatalf("stream cut after %d events: %v", n, err)
		}
		n++
		if ev == "[DONE]" {
			break
		}
	}
	if code := g.Wait(10 * time.Second); code != 0 {
		t.Fatalf("exit code %d after drain", code)
	}
	if !strings.Contains(g.Output(), "draining") {
		t.Fatalf("no drain log line:\n%s", g.Output())
	}
}
