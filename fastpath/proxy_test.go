package fastpath

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/smg-go/smg/internal/clock"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

const chatBody = `{"model":"m1","messages":[{"role":"user","content":"hello"}]}`

func TestRoundRobinSpreadsExactlyAndSetsHeaders(t *testing.T) {
	a, b, c := newFakeWorker(t, "a", 200), newFakeWorker(t, "b", 200), newFakeWorker(t, "c", 200)
	g := newGateway(t, "round_robin", Config{}, a, b, c)
	counts := map[string]int{}
	for range 30 {
		resp := g.do("POST", "/v1/chat/completions", chatBody)
		if resp.StatusCode() != 200 || string(resp.Body()) != string(okBody) {
			t.Fatalf("status %d body %q", resp.StatusCode(), resp.Body())
		}
		counts[string(resp.Header.Peek("X-Smg-Routed-Worker-Id"))]++
		id := string(resp.Header.Peek("X-Request-Id"))
		if !strings.HasPrefix(id, "chatcmpl-") || len(id) != len("chatcmpl-")+24 {
			t.Fatalf("generated request id %q", id)
		}
		if seen := string(resp.Header.Peek("X-Seen-Request-Id")); seen != id {
			t.Fatalf("worker saw request id %q, client got %q", seen, id)
		}
		fasthttp.ReleaseResponse(resp)
	}
	for _, u := range []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://10.0.0.3:8000"} {
		if counts[u] != 10 {
			t.Fatalf("round robin counts %v, want 10 each", counts)
		}
	}
	if n := g.inFlight(); n != 0 {
		t.Fatalf("in-flight %d after buffered responses", n)
	}
}

func TestClientRequestIDIsForwardedAndEchoed(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	resp := g.do("POST", "/generate", `{"text":"hi"}`, "X-Request-Id", "my-id-1")
	if got := string(resp.Header.Peek("X-Request-Id")); got != "my-id-1" {
		t.Fatalf("echoed %q", got)
	}
	if got := string(resp.Header.Peek("X-Seen-Request-Id")); got != "my-id-1" {
		t.Fatalf("forwarded %q", got)
	}
	resp = g.do("POST", "/v1/completions", `{"model":"m1","prompt":"hi"}`)
	if got := string(resp.Header.Peek("X-Request-Id")); !strings.HasPrefix(got, "cmpl-") {
		t.Fatalf("completions id %q", got)
	}
	resp = g.do("POST", "/generate", `{"text":"hi"}`)
	if got := string(resp.Header.Peek("X-Request-Id")); !strings.HasPrefix(got, "gnt-") {
		t.Fatalf("generate id %q", got)
	}
}

// envelope decodes the OpenAI error envelope and checks it is complete.
func envelope(t *testing.T, resp *fasthttp.Response) (code, typ, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Body(), &e); err != nil {
		t.Fatalf("error body %q: %v", resp.Body(), err)
	}
	if !strings.Contains(string(resp.Body()), `"param":null`) || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("incomplete envelope %s", resp.Body())
	}
	if h := string(resp.Header.Peek("X-SMG-Error-Code")); h != e.Error.Code {
		t.Fatalf("X-SMG-Error-Code %q, envelope code %q", h, e.Error.Code)
	}
	return e.Error.Code, e.Error.Type, e.Error.Message
}

func TestErrorsAnswerTheirStatusAndEnvelope(t *testing.T) {
	slow := newFakeWorker(t, "slow", 200)
	slow.delay = 2 * time.Second
	g := newGateway(t, "round_robin", Config{MaxPayloadSize: 4096, RequestTimeout: 200 * time.Millisecond}, slow)

	cases := []struct {
		name, method, path, body string
		status                   int
		code, msgPart            string
	}{
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model":"m1",`, 400, "invalid_request", "invalid JSON"},
		{"wrong type", "POST", "/v1/chat/completions", `{"model":7,"messages":[]}`, 400, "invalid_request", `"model"`},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"nope","messages":[]}`, 404, "model_not_found", "nope"},
		{"worker timeout", "POST", "/v1/chat/completions", chatBody, 504, "worker_timeout", "--request-timeout-secs"},
		{"unknown path", "POST", "/v2/whatever", `{}`, 404, "not_found", "/v2/whatever"},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, "method_not_allowed", "POST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.do(tc.method, tc.path, tc.body)
			if resp.StatusCode() != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode(), tc.status, resp.Body())
			}
			code, _, msg := envelope(t, resp)
			if code != tc.code || !strings.Contains(msg, tc.msgPart) {
				t.Fatalf("code %q msg %q, want %q containing %q", code, msg, tc.code, tc.msgPart)
			}
		})
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })

	// A body over --max-payload-size: fasthttp answers 413 and closes the connection, maybe
	// while a client is still writing, so send the whole request first on a raw connection
	// and then read the answer.
	conn, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m1","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatalf("reading the 413: %v", err)
	}
	if code, _, msg := envelope(t, &resp); resp.StatusCode() != 413 || code != "payload_too_large" || !strings.Contains(msg, "--max-payload-size") {
		t.Fatalf("too large: %d %s", resp.StatusCode(), resp.Body())
	}
}

func TestUnreachableAndNoWorkers(t *testing.T) {
	g := newGateway(t, "round_robin", Config{})
	resp := g.do("POST", "/v1/chat/completions", `{"messages":[]}`)
	if resp.StatusCode() != 503 {
		t.Fatalf("no workers: status %d", resp.StatusCode())
	}
	if code, _, _ := envelope(t, resp); code != "no_available_workers" {
		t.Fatalf("code %q", code)
	}
	w := g.addWorker("http://10.9.9.9:8000", "m1") // nothing listens there
	resp = g.do("POST", "/v1/chat/completions", chatBody)
	if resp.StatusCode() != 502 {
		t.Fatalf("unreachable: status %d %s", resp.StatusCode(), resp.Body())
	}
	if code, _, _ := envelope(t, resp); code != "worker_unreachable" {
		t.Fatalf("code %q", code)
	}
	if w.InFlight.Load() != 0 {
		t.Fatalf("in-flight %d after a connection failure", w.InFlight.Load())
	}
}

// openStream sends a streamed chat request on a raw connection and returns a reader of the
// response, so that the test controls when it reads and when it hangs up.
func openStream(t *testing.T, g *gateway) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	// The response headers are not awaited here: like many engines, the fake worker sends its
	// headers with the first event, so they arrive with the first readEvent.
	return conn, bufio.NewReader(conn)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// readEvent reads until one whole SSE event ("data: ...\n\n") has arrived, skipping the
// HTTP framing around it (status line, headers, chunk sizes).
func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var sb strings.Builder
	for !strings.HasSuffix(sb.String(), "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read event: %v (got %q)", err, sb.String())
		}
		if strings.HasPrefix(line, "data:") || line == "\n" {
			sb.WriteString(line)
		}
	}
	return sb.String()
}

func TestStreamIsRelayedEventByEvent(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{}, fw)
	checkStreamRelayedEventByEvent(t, g, fw)
}

// checkStreamRelayedEventByEvent opens a stream through g to its one worker fw and checks
// that each event fw sends reaches the client before the next is sent, with the request in
// flight until the stream ends.
func checkStreamRelayedEventByEvent(t *testing.T, g *gateway, fw *fakeWorker) {
	t.Helper()
	conn, br := openStream(t, g)
	defer conn.Close()
	w := g.reg.Current().Workers[0]
	for i, ev := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		fw.events <- ev // the worker sends the next event only after the client read the last
		if got := readEvent(t, br); got != "data: "+ev+"\n\n" {
			t.Fatalf("event %d: %q", i, got)
		}
		if w.InFlight.Load() != 1 {
			t.Fatalf("in-flight %d mid-stream, want 1", w.InFlight.Load())
		}
	}
	close(fw.events)
	if got := readEvent(t, br); got != "data: [DONE]\n\n" {
		t.Fatalf("last event %q", got)
	}
	testutil.Eventually(t, "in-flight 0 after the stream ended", func() bool { return w.InFlight.Load() == 0 })
}

// TestStreamAwaitsItsFirstToken: a streamed request counts among its worker's requests
// awaiting their first token (worker.Worker.Awaiting, which the expected-wait score ranks by)
// from its dispatch until the answer's first event arrives, and no longer; a buffered one
// never counts (its first token comes with its last).
func TestStreamAwaitsItsFirstToken(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{}, fw)
	w := g.reg.Current().Workers[0]
	if r := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hello"}]}`); r.StatusCode() != 200 {
		t.Fatalf("buffered request: %d %s", r.StatusCode(), r.Body())
	}
	if n, _, _ := w.Awaiting(); n != 0 {
		t.Fatalf("%d requests awaiting a first token after a buffered answer, want 0", n)
	}
	conn, br := openStream(t, g)
	defer conn.Close()
	ended := false
	defer func() {
		if !ended { // a failure: let the fake's stream end, or its server waits for it
			close(fw.events)
		}
	}()
	testutil.Eventually(t, "the stream awaiting its first event", func() bool { n, _, _ := w.Awaiting(); return n == 1 })
	if n, tokens, unknown := w.Awaiting(); n != 1 || tokens < 1 || unknown != 0 {
		t.Fatalf("awaiting %d requests (%d tokens, %d unknown) before the first event, want 1 of the routing text's size", n, tokens, unknown)
	}
	fw.events <- `{"n":1}`
	readEvent(t, br)
	testutil.Eventually(t, "nothing awaiting once the first event is relayed", func() bool { n, _, _ := w.Awaiting(); return n == 0 })
	if _, tokens, _ := w.Awaiting(); tokens != 0 || w.InFlight.Load() != 1 {
		t.Fatalf("after the first event: %d tokens awaiting, %d in flight; want 0 and 1", tokens, w.InFlight.Load())
	}
	ended = true
	close(fw.events)
	readEvent(t, br)
	testutil.Eventually(t, "in-flight 0 after the stream ended", func() bool { return w.InFlight.Load() == 0 })
}

// TestStreamTimesItsDecodeSteps: a relayed stream that ends whole gives its worker one sample
// of its decode step (worker.Worker.DecodeStep: the gaps between its pieces after the first,
// worker.DecodeTimer), the speed the load-aware policies compare workers by; one with fewer
// than worker.MinDecodeSteps pieces after its first, or a buffered answer, gives none.
func TestStreamTimesItsDecodeSteps(t *testing.T) {
	for _, c := range []struct {
		events, samples int
		buffered        bool
	}{
		{worker.MinDecodeSteps + 2, 1, false}, // its first, then MinDecodeSteps+2 gaps (the fake's [DONE] a piece of its own)
		{worker.MinDecodeSteps - 1, 0, false}, // MinDecodeSteps-1 gaps
		{0, 0, true},
	} {
		fw := newFakeWorker(t, "a", 200)
		g := newGateway(t, "round_robin", Config{}, fw)
		w := g.reg.Current().Workers[0]
		if c.buffered {
			if r := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hello"}]}`); r.StatusCode() != 200 {
				t.Fatalf("buffered request: %d %s", r.StatusCode(), r.Body())
			}
		} else {
			conn, br := openStream(t, g)
			for i := range c.events {
				fw.events <- fmt.Sprintf(`{"n":%d}`, i)
				readEvent(t, br) // relayed before the next leaves: a piece each
				time.Sleep(time.Millisecond)
			}
			close(fw.events)
			readEvent(t, br)
			// Closed only once the gateway has the whole answer: a client gone before the
			// worker's last chunk is no answer ended whole.
			defer conn.Close()
		}
		testutil.Eventually(t, "in-flight 0 after the answer", func() bool { return w.InFlight.Load() == 0 })
		if step, n := w.DecodeStep(); n != int64(c.samples) || c.samples > 0 && !(step > 0) {
			t.Errorf("stream of %d events (buffered %v): DecodeStep %v s from %d answers, want %d sample(s), above 0",
				c.events, c.buffered, step, n, c.samples)
		}
	}
}

// TestFailedStreamStopsAwaiting: a stream answered with an error, which never sends an event,
// stops counting as awaiting its first token when the attempt ends.
func TestFailedStreamStopsAwaiting(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 500))
	w := g.reg.Current().Workers[0]
	if r := g.do("POST", "/v1/chat/completions", `{"model":"m1","stream":true,"messages":[{"role":"user","content":"hello"}]}`); r.StatusCode() < 500 {
		t.Fatalf("status %d, want the worker's error", r.StatusCode())
	}
	testutil.Eventually(t, "nothing awaiting after the failed stream", func() bool {
		n, tokens, unknown := w.Awaiting()
		return n == 0 && tokens == 0 && unknown == 0
	})
}

func TestClientHangupMidStreamCancelsUpstream(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{}, fw)
	conn, br := openStream(t, g)
	w := g.reg.Current().Workers[0]
	fw.events <- `{"n":1}`
	readEvent(t, br)
	conn.Close()
	// The next event's write fails at the gateway, which closes the upstream connection: the
	// worker's own writes then fail, as an engine's would when its client cancels.
	go func() {
		for {
			select {
			case fw.events <- `{"n":2}`:
			case <-time.After(5 * time.Second):
				return
			}
		}
	}()
	select {
	case <-fw.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never saw the stream cancelled")
	}
	testutil.Eventually(t, "in-flight 0 after the client hung up", func() bool { return w.InFlight.Load() == 0 })
}

func TestReadinessLivenessModels(t *testing.T) {
	g := newGateway(t, "round_robin", Config{})
	if r := g.do("GET", "/readiness", ""); r.StatusCode() != 503 || !strings.Contains(string(r.Body()), `"status":"not ready"`) {
		t.Fatalf("readiness without workers: %d %s", r.StatusCode(), r.Body())
	}
	g.setFake("10.0.0.1:8000", newFakeWorker(t, "a", 200))
	g.addWorker("http://10.0.0.1:8000", "m1")
	r := g.do("GET", "/readiness", "")
	if r.StatusCode() != 200 || string(r.Body()) != `{"healthy_workers":1,"status":"ready","total_workers":1}` {
		t.Fatalf("readiness: %d %s", r.StatusCode(), r.Body())
	}
	for _, p := range []string{"/health", "/liveness"} {
		if r := g.do("GET", p, ""); r.StatusCode() != 200 || string(r.Body()) != "OK" {
			t.Fatalf("%s: %d %s", p, r.StatusCode(), r.Body())
		}
	}
	r = g.do("GET", "/v1/models", "")
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
			Created             int64
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body(), &list); err != nil || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "m1" || list.Data[0].Object != "model" || list.Data[0].Created == 0 {
		t.Fatalf("models: %s (%v)", r.Body(), err)
	}
	g.srv.Drain()
	if r := g.do("GET", "/readiness", ""); r.StatusCode() != 503 || !strings.Contains(string(r.Body()), "draining") {
		t.Fatalf("readiness while draining: %d %s", r.StatusCode(), r.Body())
	}
}

func TestParseRoutingTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint32
		ok   bool
	}{
		{"1,2,3", []uint32{1, 2, 3}, true},
		{"[4, 5]", []uint32{4, 5}, true},
		{"4294967295", []uint32{4294967295}, true},
		{"4294967296", nil, false},
		{"1,,2", nil, false},
		{"a", nil, false},
		{"", nil, false},
		{"[]", nil, false},
	} {
		got, ok := parseRoutingTokens(nil, []byte(tc.in))
		if ok != tc.ok || (ok && !equalU32(got, tc.want)) {
			t.Errorf("%q: got %v %v, want %v %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzParseRoutingTokens(f *testing.F) {
	for _, s := range []string{"1,2,3", "[1, 2]", "4294967295", "", ",", "[", "99999999999", "1 2 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseRoutingTokens(nil, []byte(s))
		if !ok {
			return
		}
		// Whatever parses re-serialises to the same token list.
		var sb strings.Builder
		for i, v := range got {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(itoa(int(v)))
		}
		again, ok2 := parseRoutingTokens(nil, []byte(sb.String()))
		if !ok2 || !equalU32(got, again) {
			t.Fatalf("%q parsed to %v, which does not round-trip", s, got)
		}
	})
}

func TestWorkerDeathMidStreamEndsWithAnErrorEvent(t *testing.T) {
	g := newGateway(t, "round_robin", Config{})
	ln := newTestListener(t)
	defer ln.Close()
	go func() { // a worker that sends one event and dies
		c, err := ln.Accept()
		if err != nil {
			return
		}
		var req fasthttp.Request
		_ = req.Read(bufio.NewReader(c))
		event := "data: {\"n\":1}\n\n"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(event), event)
		time.Sleep(50 * time.Millisecond)
		c.Close()
	}()
	g.setFake("10.0.0.7:8000", &fakeWorker{ln: ln})
	w := g.addWorker("http://10.0.0.7:8000", "m1")

	conn, br := openStream(t, g)
	defer conn.Close()
	if ev := readEvent(t, br); ev != "data: {\"n\":1}\n\n" {
		t.Fatalf("first event %q", ev)
	}
	if ev := readEvent(t, br); !strings.Contains(ev, `"code":"worker_stream_failed"`) {
		t.Fatalf("no error event: %q", ev)
	}
	if ev := readEvent(t, br); ev != "data: [DONE]\n\n" {
		t.Fatalf("no [DONE] after the error event: %q", ev)
	}
	// The chunked body is terminated properly: the next line is the last chunk.
	if line, _ := br.ReadString('\n'); strings.TrimSpace(line) != "" && strings.TrimSpace(line) != "0" {
		t.Fatalf("body not terminated cleanly: %q", line)
	}
	testutil.Eventually(t, "in-flight 0", func() bool { return w.InFlight.Load() == 0 })
	if st := w.Breaker.Stats(clock.Nanos()); st.Faults == 0 {
		t.Fatalf("the broken stream was not recorded as a fault: %+v", st)
	}
}

// TestRoutingDecisionsLoggedAtDebug: at --log-level debug every selection is logged with the
// policy and the chosen worker (spec: Observability); at info nothing is.
func TestRoutingDecisionsLoggedAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		log, buf := testutil.Logger(level)
		cfg := Config{Logger: log}
		g := newGateway(t, "round_robin", cfg, newFakeWorker(t, "a", 200))
		if resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode() != 200 {
			t.Fatalf("status %d", resp.StatusCode())
		}
		logged := strings.Contains(buf.String(), `msg="Routing decision" policy=round_robin model=m1 worker_type=regular worker=http://10.0.0.1:8000`)
		if logged != (level == slog.LevelDebug) {
			t.Fatalf("level %v: decision logged %v:\n%s", level, logged, buf.String())
		}
	}
}
