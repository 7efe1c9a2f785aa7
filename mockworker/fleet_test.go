package mockworker

import (
	"bufio"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

var servers = []ServerKind{ServerGnet, ServerFastHTTP}

// config is DefaultConfig changed by set: a test says only what differs from the defaults.
func config(set func(c *Config)) Config {
	c := DefaultConfig()
	set(&c)
	return c
}

// startFleet starts a fleet closed at the end of the test.
func startFleet(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return f
}

// forEachServer runs fn once per HTTP implementation.
func forEachServer(t *testing.T, fn func(t *testing.T, kind ServerKind)) {
	for _, k := range servers {
		t.Run(string(k), func(t *testing.T) { fn(t, k) })
	}
}

// do sends one request and returns the response with its body read.
func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("invalid JSON %q: %v", s, err)
	}
	return m
}

// path walks decoded JSON: keys for objects, ints for arrays.
func path(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: not an object: %v", k, v)
			}
			v, ok = m[k]
			if !ok {
				t.Fatalf("missing key %q in %v", k, m)
			}
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: not an array long enough: %v", k, v)
			}
			v = a[k]
		}
	}
	return v
}

func TestRoutes(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, config(func(c *Config) { c.Server, c.Count, c.Model, c.OutputTokens = kind, 2, "m-1", 3 }))
		for i, w := range f.Workers() {
			if w.ID() != f.Addrs()[i] {
				t.Errorf("worker %d id %q, want its address %q", i, w.ID(), f.Addrs()[i])
			}
			resp, body := do(t, "GET", w.URL()+"/health", "")
			if resp.StatusCode != 200 || resp.Header.Get(headerWorkerID) != w.ID() {
				t.Errorf("health: %d %q worker %q", resp.StatusCode, body, resp.Header.Get(headerWorkerID))
			}
		}
		u := f.URLs()[1]
		id := f.Workers()[1].ID()

		resp, body := do(t, "GET", u+"/v1/models", "")
		m := decode(t, body)
		if resp.StatusCode != 200 || path(t, m, "object") != "list" || path(t, m, "data", 0, "id") != "m-1" ||
			path(t, m, "data", 0, "object") != "model" || path(t, m, "data", 0, "owned_by") != "mockworker" {
			t.Errorf("models: %d %s", resp.StatusCode, body)
		}
		if _, ok := path(t, m, "data", 0, "created").(float64); !ok {
			t.Errorf("models: created is not a number: %s", body)
		}

		resp, body = do(t, "POST", u+"/v1/chat/completions",
			`{"model":"m-1","messages":[{"role":"user","content":"12345678"}],"max_tokens":2}`, "X-Request-Id", "req-9")
		m = decode(t, body)
		if resp.StatusCode != 200 || resp.Header.Get(headerWorkerID) != id || resp.Header.Get(headerRequestID) != "req-9" {
			t.Errorf("chat: %d worker %q rid %q", resp.StatusCode, resp.Header.Get(headerWorkerID), resp.Header.Get(headerRequestID))
		}
		if path(t, m, "object") != "chat.completion" || path(t, m, "model") != "m-1" ||
			path(t, m, "choices", 0, "message", "role") != "assistant" ||
			path(t, m, "choices", 0, "message", "content") != "the mock " ||
			path(t, m, "choices", 0, "finish_reason") != "length" ||
			path(t, m, "usage", "prompt_tokens") != 2.0 || path(t, m, "usage", "completion_tokens") != 2.0 ||
			path(t, m, "usage", "total_tokens") != 4.0 {
			t.Errorf("chat body: %s", body)
		}

		resp, body = do(t, "POST", u+"/v1/completions", `{"prompt":"abc"}`)
		m = decode(t, body)
		if resp.StatusCode != 200 || path(t, m, "object") != "text_completion" ||
			path(t, m, "choices", 0, "text") != "the mock cat " || path(t, m, "usage", "completion_tokens") != 3.0 {
			t.Errorf("completions (default --output-tokens 3): %d %s", resp.StatusCode, body)
		}

		resp, body = do(t, "POST", u+"/generate", `{"text":"abcde","rid":"r\"1","sampling_params":{"max_new_tokens":1}}`)
		m = decode(t, body)
		if resp.StatusCode != 200 || path(t, m, "text") != "the " || path(t, m, "meta_info", "id") != `r"1` ||
			path(t, m, "meta_info", "prompt_tokens") != 2.0 || path(t, m, "meta_info", "completion_tokens") != 1.0 ||
			path(t, m, "meta_info", "cached_tokens") != 0.0 ||
			path(t, m, "meta_info", "finish_reason", "type") != "length" ||
			path(t, m, "meta_info", "finish_reason", "length") != 1.0 {
			t.Errorf("generate: %d %s", resp.StatusCode, body)
		}

		resp, body = do(t, "POST", u+"/v1/chat/completions", `{"messages":`)
		if resp.StatusCode != 400 || path(t, decode(t, body), "error", "type") != "invalid_request_error" {
			t.Errorf("bad JSON: %d %s", resp.StatusCode, body)
		}
		resp, _ = do(t, "GET", u+"/nowhere", "")
		if resp.StatusCode != 404 || resp.Header.Get(headerWorkerID) != id {
			t.Errorf("unknown path: %d, worker %q", resp.StatusCode, resp.Header.Get(headerWorkerID))
		}
		for _, mp := range [][2]string{{"GET", "/v1/chat/completions"}, {"POST", "/health"}, {"DELETE", "/v1/models"}, {"POST", "/v1/loads"}, {"PATCH", "/admin/config"}} {
			if resp, _ := do(t, mp[0], u+mp[1], ""); resp.StatusCode != 405 {
				t.Errorf("%s %s: %d, want 405", mp[0], mp[1], resp.StatusCode)
			}
		}
		if got := f.Workers()[1].Served(); got != 3 {
			t.Errorf("worker 1 served %d generations, want 3", got)
		}
		if got := f.Workers()[0].Served(); got != 0 {
			t.Errorf("worker 0 served %d generations, want 0", got)
		}
	})
}

func TestWorkerIDPrefixAndFixedPorts(t *testing.T) {
	// Fixed ports below Linux's ephemeral range (32768+), where nothing else on the machine
	// binds by chance; retry elsewhere if a parallel test holds one.
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1)) // parallel runs differ; outcome does not depend on it
	var f *Fleet
	var port int
	for attempt := 0; f == nil; attempt++ {
		port = 20000 + rng.IntN(12000)
		var err error
		f, err = Start(config(func(c *Config) { c.Port, c.Count, c.WorkerIDPrefix = port, 2, "w-" }))
		if err != nil && attempt == 50 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = f.Close() })
	for i, w := range f.Workers() {
		if w.ID() != "w-"+itoa(i) {
			t.Errorf("worker %d id %q", i, w.ID())
		}
		if got := w.Addr(); got != net.JoinHostPort("127.0.0.1", itoa(port+i)) {
			t.Errorf("worker %d at %s, want port %d", i, got, port+i)
		}
		resp, _ := do(t, "GET", w.URL()+"/health", "")
		if resp.Header.Get(headerWorkerID) != w.ID() {
			t.Errorf("header %q, want %q", resp.Header.Get(headerWorkerID), w.ID())
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// sseEvents reads a whole SSE body and returns each event's data.
func sseEvents(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

func TestStreamFraming(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		u := startFleet(t, config(func(c *Config) { c.Server = kind })).URLs()[0]

		resp, body := do(t, "POST", u+"/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != contentSSE {
			t.Fatalf("chat stream: %d %q", resp.StatusCode, ct)
		}
		ev := sseEvents(t, body)
		if len(ev) != 5 || ev[4] != "[DONE]" {
			t.Fatalf("chat stream: want 3 tokens, usage, [DONE]; got %q", ev)
		}
		var text strings.Builder
		for i := range 3 {
			m := decode(t, ev[i])
			if path(t, m, "object") != "chat.completion.chunk" {
				t.Errorf("chunk %d: %s", i, ev[i])
			}
			text.WriteString(path(t, m, "choices", 0, "delta", "content").(string))
			wantFinish := any(nil)
			if i == 2 {
				wantFinish = "length"
			}
			if path(t, m, "choices", 0, "finish_reason") != wantFinish {
				t.Errorf("chunk %d finish_reason: %s", i, ev[i])
			}
		}
		if text.String() != "the mock cat " {
			t.Errorf("streamed text %q", text.String())
		}
		if path(t, decode(t, ev[0]), "choices", 0, "delta", "role") != "assistant" {
			t.Errorf("first chunk has no role: %s", ev[0])
		}
		usage := decode(t, ev[3])
		if len(path(t, usage, "choices").([]any)) != 0 || path(t, usage, "usage", "completion_tokens") != 3.0 ||
			path(t, usage, "usage", "prompt_tokens") != 1.0 {
			t.Errorf("usage chunk: %s", ev[3])
		}

		_, body = do(t, "POST", u+"/v1/completions", `{"prompt":"hi","max_tokens":2,"stream":true}`)
		ev = sseEvents(t, body)
		if len(ev) != 3 || ev[2] != "[DONE]" || path(t, decode(t, ev[1]), "choices", 0, "text") != "mock " {
			t.Errorf("completions stream without include_usage: %q", ev)
		}

		_, body = do(t, "POST", u+"/generate", `{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":2},"stream":true}`)
		ev = sseEvents(t, body)
		if len(ev) != 3 || ev[2] != "[DONE]" {
			t.Fatalf("generate stream: %q", ev)
		}
		first, last := decode(t, ev[0]), decode(t, ev[1])
		if path(t, first, "text") != "the " || path(t, first, "meta_info", "finish_reason") != nil ||
			path(t, last, "text") != "the mock " || path(t, last, "meta_info", "finish_reason", "type") != "length" ||
			path(t, last, "meta_info", "prompt_tokens") != 3.0 || path(t, last, "meta_info", "completion_tokens") != 2.0 {
			t.Errorf("generate stream must carry cumulative text and meta_info: %q", ev)
		}
	})
}

func TestLoadsShape(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		u := startFleet(t, config(func(c *Config) { c.Server, c.KVTokens, c.MaxRunning = kind, 1000, 8 })).URLs()[0]
		resp, body := do(t, "GET", u+"/v1/loads", "")
		m := decode(t, body)
		if resp.StatusCode != 200 {
			t.Fatalf("loads: %d", resp.StatusCode)
		}
		if _, err := time.Parse(time.RFC3339, path(t, m, "timestamp").(string)); err != nil {
			t.Errorf("timestamp: %v", err)
		}
		if path(t, m, "version") != "mock" || path(t, m, "dp_rank_count") != 1.0 {
			t.Errorf("loads header: %s", body)
		}
		want := map[string]float64{
			"dp_rank": 0, "num_running_reqs": 0, "num_waiting_reqs": 0, "num_total_reqs": 0, "num_used_tokens": 0,
			"max_total_num_tokens": 1000, "token_usage": 0, "gen_throughput": 0, "cache_hit_rate": 0,
			"utilization": 0, "max_running_requests": 8, "num_waiting_uncached_tokens": 0,
		}
		rank := path(t, m, "loads", 0).(map[string]any)
		if len(rank) != len(want) {
			t.Errorf("loads[0] has keys %v, want exactly %v", rank, want)
		}
		for k, v := range want {
			if path(t, rank, k) != v {
				t.Errorf("loads[0].%s = %v, want %v", k, rank[k], v)
			}
		}
		agg := path(t, m, "aggregate").(map[string]any)
		for _, k := range []string{"total_running_reqs", "total_waiting_reqs", "total_reqs", "avg_token_usage", "avg_throughput", "avg_utilization"} {
			if _, ok := agg[k].(float64); !ok {
				t.Errorf("aggregate.%s missing or not a number: %s", k, body)
			}
		}
	})
}

func TestLoadsCountsRequestsInProgress(t *testing.T) {
	f := startFleet(t, config(func(c *Config) { c.TokenInterval = time.Hour }))
	u := f.URLs()[0]
	resp, err := http.Post(u+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, body := do(t, "GET", u+"/v1/loads", "")
	m := decode(t, body)
	if path(t, m, "loads", 0, "num_running_reqs") != 1.0 || path(t, m, "aggregate", "total_running_reqs") != 1.0 ||
		path(t, m, "loads", 0, "utilization") != 1.0/DefaultMaxRunning {
		t.Errorf("one paced stream in progress: %s", body)
	}
}

func TestAdminConfig(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, config(func(c *Config) { c.Server, c.Count = kind, 2 }))
		u := f.URLs()[0]
		resp, body := do(t, "POST", u+"/admin/config", `{"status":503}`)
		if resp.StatusCode != 200 || path(t, decode(t, body), "status") != 503.0 || path(t, decode(t, body), "healthy") != true {
			t.Fatalf("admin: %d %s", resp.StatusCode, body)
		}
		for _, route := range []string{"/v1/chat/completions", "/v1/completions", "/generate"} {
			resp, body = do(t, "POST", u+route, `{}`)
			if resp.StatusCode != 503 || path(t, decode(t, body), "error", "code") != 503.0 {
				t.Errorf("%s under status 503: %d %s", route, resp.StatusCode, body)
			}
		}
		if resp, _ := do(t, "POST", f.URLs()[1]+"/generate", `{"text":"x"}`); resp.StatusCode != 200 {
			t.Errorf("the other worker must stay healthy: %d", resp.StatusCode)
		}
		if resp, _ := do(t, "GET", u+"/health", ""); resp.StatusCode != 200 {
			t.Errorf("status fault must leave /health alone: %d", resp.StatusCode)
		}
		resp, body = do(t, "POST", u+"/admin/config", `{"status":0,"healthy":false}`)
		if path(t, decode(t, body), "status") != 0.0 || path(t, decode(t, body), "healthy") != false {
			t.Fatalf("admin: %d %s", resp.StatusCode, body)
		}
		if resp, _ := do(t, "GET", u+"/health", ""); resp.StatusCode != 503 {
			t.Errorf("unhealthy worker /health: %d", resp.StatusCode)
		}
		if resp, _ := do(t, "POST", u+"/generate", `{"text":"x"}`); resp.StatusCode != 200 {
			t.Errorf("status 0 clears the fault: %d", resp.StatusCode)
		}
		if got := f.Workers()[0].Config(); got != (AdminConfig{Unhealthy: true}) {
			t.Errorf("Config() = %+v", got)
		}
		resp, body = do(t, "POST", u+"/admin/config", `{"delay_ms":"soon"}`)
		if resp.StatusCode != 400 || !strings.Contains(body, "delay_ms") {
			t.Errorf("bad admin config: %d %s", resp.StatusCode, body)
		}
		if _, body := do(t, "GET", u+"/admin/config", ""); path(t, decode(t, body), "healthy") != false || path(t, decode(t, body), "delay_ms") != 0.0 {
			t.Errorf("a rejected update must change nothing: %s", body)
		}
		if err := f.Workers()[0].Configure(AdminConfig{Status: 700}); err == nil {
			t.Error("Configure accepted status 700")
		}
	})
}

// TestDelay checks that a delayed answer arrives complete; the delay's length is a benchmark
// matter, not asserted here.
func TestDelay(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, config(func(c *Config) { c.Server = kind }))
		if err := f.Workers()[0].Configure(AdminConfig{Delay: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		u := f.URLs()[0]
		resp, body := do(t, "POST", u+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
		if resp.StatusCode != 200 || path(t, decode(t, body), "choices", 0, "text") != "the " {
			t.Errorf("delayed: %d %s", resp.StatusCode, body)
		}
		_, body = do(t, "POST", u+"/v1/completions", `{"prompt":"x","max_tokens":2,"stream":true}`)
		if ev := sseEvents(t, body); len(ev) != 3 {
			t.Errorf("delayed stream: %q", ev)
		}
		if f.Workers()[0].Active() != 0 {
			t.Errorf("active = %d after the answers", f.Workers()[0].Active())
		}
	})
}

func TestFaultHeader(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, config(func(c *Config) { c.Server = kind }))
		u := f.URLs()[0]
		resp, body := do(t, "POST", u+"/v1/chat/completions", `{"messages":[{"content":"x"}]}`, faultHeader, "status=429")
		if resp.StatusCode != 429 || path(t, decode(t, body), "error", "type") != "mock_fault" {
			t.Errorf("status=429: %d %s", resp.StatusCode, body)
		}
		resp, body = do(t, "POST", u+"/generate", `{"text":"x"}`, faultHeader, "bogus")
		if resp.StatusCode != 400 || !strings.Contains(body, "unknown item") {
			t.Errorf("bad fault header: %d %s", resp.StatusCode, body)
		}

		// hang: no answer; the worker still serves others, and Close releases the request.
		conn, err := net.Dial("tcp", f.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "POST /generate HTTP/1.1\r\nHost: x\r\nX-Mock-Fault: hang\r\nContent-Length: 12\r\n\r\n{\"text\":\"x\"}"); err != nil {
			t.Fatal(err)
		}
		if resp, _ := do(t, "GET", u+"/health", ""); resp.StatusCode != 200 {
			t.Errorf("health during a hang: %d", resp.StatusCode)
		}
		testutil.Eventually(t, "the hanging request to be counted", func() bool { return f.Workers()[0].Active() == 1 })
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		// After Close the hanging connection gets no generation answer.
		b, _ := io.ReadAll(conn)
		if strings.Contains(string(b), "200 OK") {
			t.Errorf("hang answered: %q", b)
		}
		if got := f.Workers()[0].Active(); got != 0 {
			t.Errorf("active after close = %d", got)
		}
	})
}

func TestHangUpMidStream(t *testing.T) {
	forEachServer(t, func(t *testing.T, kind ServerKind) {
		f := startFleet(t, config(func(c *Config) { c.Server, c.TokenInterval = kind, 5*time.Millisecond }))
		conn, err := net.Dial("tcp", f.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		body := `{"prompt":"x","max_tokens":100000,"stream":true}`
		if _, err := io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(line, "data: ") {
				break // the first token arrived
			}
		}
		_ = conn.Close()
		testutil.Eventually(t, "the worker to notice the hang-up", func() bool { return f.Workers()[0].Active() == 0 })
	})
}

func TestGnetHTTPDetails(t *testing.T) {
	f := startFleet(t, config(func(c *Config) { c.OutputTokens = 1 }))
	conn, err := net.Dial("tcp", f.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	readResp := func(req *http.Request) (*http.Response, string) {
		t.Helper()
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	// Pipelining: three requests in one write, answered in order (told apart by request id);
	// the middle one has a chunked body.
	_, err = io.WriteString(conn,
		"GET /health HTTP/1.1\r\nX-Request-Id: a\r\n\r\n"+
			"POST /generate HTTP/1.1\r\nX-Request-Id: b\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"tex\r\n7\r\nt\":\"x\"}\r\n0\r\n\r\n"+
			"HEAD /v1/models HTTP/1.1\r\nX-Request-Id: c\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ rid, method string }{{"a", "GET"}, {"b", "POST"}, {"c", "HEAD"}} {
		resp, body := readResp(&http.Request{Method: want.method})
		if resp.Header.Get(headerRequestID) != want.rid || resp.StatusCode != 200 {
			t.Fatalf("pipelined answer %q: %d rid %q body %q", want.rid, resp.StatusCode, resp.Header.Get(headerRequestID), body)
		}
		if want.rid == "b" && path(t, decode(t, body), "text") != "the " {
			t.Errorf("chunked request body answer: %s", body)
		}
		if want.rid == "c" && (body != "" || resp.ContentLength <= 0) {
			t.Errorf("HEAD: body %q, length %d", body, resp.ContentLength)
		}
	}

	// Expect: 100-continue gets its interim answer before the body is sent.
	if _, err := io.WriteString(conn, "POST /generate HTTP/1.1\r\nContent-Length: 12\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("interim answer %q, %v", line, err)
	}
	if l, _ := br.ReadString('\n'); l != "\r\n" {
		t.Fatalf("interim answer not terminated: %q", l)
	}
	if _, err := io.WriteString(conn, `{"text":"x"}`); err != nil {
		t.Fatal(err)
	}
	if resp, body := readResp(&http.Request{Method: "POST"}); resp.StatusCode != 200 {
		t.Fatalf("after 100-continue: %d %s", resp.StatusCode, body)
	}

	// A malformed request is answered 400 and the connection closed.
	if _, err := io.WriteString(conn, "BROKEN\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, _ := readResp(&http.Request{Method: "GET"})
	if resp.StatusCode != 400 || !resp.Close {
		t.Errorf("malformed request: %d close=%v", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection still open after a malformed request: %v", err)
	}
}

func TestPipelinedBehindPacedStream(t *testing.T) {
	f := startFleet(t, config(func(c *Config) { c.TokenInterval = time.Millisecond }))
	conn, err := net.Dial("tcp", f.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"x","max_tokens":3,"stream":true}`
	_, err = io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nX-Request-Id: s\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body+
		"GET /v1/models HTTP/1.1\r\nX-Request-Id: m\r\n\r\nGET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if ev := sseEvents(t, string(b)); resp.Header.Get(headerRequestID) != "s" || len(ev) != 4 {
		t.Fatalf("stream first: rid %q events %q", resp.Header.Get(headerRequestID), ev)
	}
	resp, err = http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil || resp.Header.Get(headerRequestID) != "m" {
		t.Fatalf("pipelined request after the stream: %v %v", resp, err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp, err = http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("third: %v %v", resp, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	// Zero is zero, never "the default": a Config not built from
	// DefaultConfig is refused on every field whose zero makes no sense.
	err := Config{}.Validate()
	for _, field := range []string{"host", "model", "count", "dialect", "output tokens", "server", "event loops",
		"kv tokens", "max running", "mode", "block size", "prefill tokens/s", "prefill chunk", "decode times",
		"time scale", "kv transfer timeout", "mockworker.DefaultConfig()"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("zero Config: %v, want it to name %q", err, field)
		}
	}
	if c := config(func(c *Config) { c.DecodePerReq, c.TokenInterval, c.Seed = 0, 0, 0 }); c.Validate() != nil {
		t.Errorf("a zero where zero means zero (no batch effect, no pacing, seed 0) was refused: %v", c.Validate())
	}
	bad := []struct {
		cfg    Config
		errHas string
	}{
		{config(func(c *Config) { c.Count = -1 }), "count"},
		{config(func(c *Config) { c.Port = 70000 }), "port"},
		{config(func(c *Config) { c.Port, c.Count = 65535, 2 }), "past 65535"},
		{config(func(c *Config) { c.Dialect = "tgi" }), "dialect"},
		{config(func(c *Config) { c.Server = "nginx" }), "server"},
		{config(func(c *Config) { c.OutputTokens = -2 }), "output tokens"},
		{config(func(c *Config) { c.TokenInterval = -1 }), "token interval"},
		{config(func(c *Config) { c.EventLoops = -1 }), "event loops"},
		{config(func(c *Config) { c.KVTokens = -1 }), "kv tokens"},
		{config(func(c *Config) { c.MaxRunning = -1 }), "max running"},
		{config(func(c *Config) { c.WorkerIDPrefix = "a\nb" }), "prefix"},
	}
	for _, b := range bad {
		err := b.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), b.errHas) {
			t.Errorf("%+v: err = %v, want one mentioning %q", b.cfg, err, b.errHas)
		}
		if _, err := Start(b.cfg); err == nil {
			t.Errorf("Start accepted %+v", b.cfg)
		}
	}
}

// The gnet event loops hold a P each while they wait, so an engine-mode fleet on gnet asks
// for Ps beside them (Config.SchedulerProcs); the other fleets keep the process's.
func TestSchedulerProcsGivesEngineLoopsTheirOwnPs(t *testing.T) {
	for _, tc := range []struct {
		mode   Mode
		server ServerKind
		loops  int
		want   int
	}{
		{ModeEngine, ServerGnet, 2, 4},
		{ModeEngine, ServerGnet, 1, 3},
		{ModeEngine, ServerFastHTTP, 2, 2},
		{ModeInstant, ServerGnet, 2, 2},
	} {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Server, cfg.EventLoops = tc.mode, tc.server, tc.loops
		if got := cfg.SchedulerProcs(2); got != tc.want {
			t.Errorf("%s on %s with %d loops: SchedulerProcs(2) = %d, want %d", tc.mode, tc.server, tc.loops, got, tc.want)
		}
	}
}
