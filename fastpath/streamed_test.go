package fastpath

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
)

// bigChat is a chat body of about n bytes with "model" first, as clients write it.
func bigChat(n int) string {
	return `{"model":"m1","messages":[{"role":"user","content":"` + strings.Repeat("x", n) + `"}]}`
}

// TestLargeBodyIsStreamedUnparsed: a body past --max-buffered-request-bytes reaches the worker
// byte for byte although the gateway never parsed it (its tail is not even JSON, which the
// parsed path answers 400); the answer is relayed and nothing stays in flight. A body under
// the limit is parsed as before.
func TestLargeBodyIsStreamedUnparsed(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	fw.bodies = make(chan []byte, 4)
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096}, fw)
	body := bigChat(300_000) + "not json"
	resp := g.do("POST", "/v1/chat/completions", body)
	if resp.StatusCode() != 200 || !bytes.Equal(resp.Body(), okBody) {
		t.Fatalf("streamed: %d %s", resp.StatusCode(), resp.Body())
	}
	if got := <-fw.bodies; string(got) != body {
		t.Fatalf("the worker got %d bytes, want the %d sent, unchanged", len(got), len(body))
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
	if resp := g.do("POST", "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]} not json`); resp.StatusCode() != 400 {
		t.Fatalf("a small invalid body: %d, want 400 from the parser", resp.StatusCode())
	}
}

// TestStreamedBodyIsNotRetried: a streamed body cannot be sent twice, so a retryable answer
// is delivered as it is instead of going to the next worker.
func TestStreamedBodyIsNotRetried(t *testing.T) {
	busy, ok := newFakeWorker(t, "busy", 503), newFakeWorker(t, "ok", 200)
	ok.bodies = make(chan []byte, 4)
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096, Retry: fastRetries()}, busy, ok)
	statuses := map[int]int{}
	for range 2 { // round robin: one of the two goes to the busy worker first
		statuses[g.do("POST", "/v1/chat/completions", bigChat(100_000)).StatusCode()]++
	}
	if statuses[503] != 1 || statuses[200] != 1 {
		t.Fatalf("statuses %v, want one 503 delivered unretried and one 200", statuses)
	}
	if len(ok.bodies) != 1 {
		t.Fatalf("the healthy worker got %d requests, want 1 (no retry of the 503)", len(ok.bodies))
	}
}

// TestStreamedBodyPicksTheModelFromItsHead: the model named first in a streamed body chooses
// the route; an unknown one is refused as when parsed.
func TestStreamedBodyPicksTheModelFromItsHead(t *testing.T) {
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 1024}, newFakeWorker(t, "a", 200))
	if resp := g.do("POST", "/v1/chat/completions", strings.Replace(bigChat(50_000), `"m1"`, `"other"`, 1)); resp.StatusCode() != 404 {
		t.Fatalf("unknown model in a streamed body: %d %s, want 404", resp.StatusCode(), resp.Body())
	}
	if resp := g.do("POST", "/v1/chat/completions", bigChat(50_000)); resp.StatusCode() != 200 {
		t.Fatalf("m1: %d %s", resp.StatusCode(), resp.Body())
	}
}

// TestStreamedChunkedBody: a chunked body past the limit is streamed (forwarded chunked) and
// arrives whole; one past --max-payload-size is cut with 413.
func TestStreamedChunkedBody(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	fw.bodies = make(chan []byte, 4)
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096, MaxPayloadSize: 200_000}, fw)
	send := func(body string) *fasthttp.Response {
		req := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(req)
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://gateway/v1/chat/completions")
		req.SetBodyStream(strings.NewReader(body), -1) // chunked
		resp := fasthttp.AcquireResponse()
		if err := g.client.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	body := bigChat(100_000)
	if resp := send(body); resp.StatusCode() != 200 {
		t.Fatalf("chunked: %d %s", resp.StatusCode(), resp.Body())
	}
	if got := <-fw.bodies; string(got) != body {
		t.Fatalf("the worker got %d bytes, want %d", len(got), len(body))
	}
	if resp := send(bigChat(300_000)); resp.StatusCode() != 413 {
		t.Fatalf("chunked past --max-payload-size: %d %s, want 413", resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestHeadModel: the head's last whole top-level "model" wins, as in a buffered body.
func TestHeadModel(t *testing.T) {
	for _, tc := range []struct {
		head, want string
		bad        bool
	}{
		{`{"model":"m1","messages":[`, "m1", false},
		{` { "stream" : true , "n": [1, {"a":"}"}], "model" : "llama" , "messages": [`, "llama", false},
		{`{"messages":[{"role":"user","content":"long`, "", false},
		{`{"model":"a\u0062"}`, "", false},
		{`{"model":7}`, "", true},
		{`["model","m"]`, "", false},
		{`{"mod`, "", false},
		{``, "", false},
		// Duplicates: the last one the head holds whole wins.
		{`{"model":"first","messages":[],"model":"last","prompt":"long`, "last", false},
		{`{"model":"first","x":{"model":"nested"},"messages":[{"content":"long`, "first", false},
		{`{"model":"first","model":null,"messages":[`, "", false},
		{`{"model":"first","model":"a\u0062","messages":[`, "", false},
		{`{"model":"first","model":["m"],"messages":[`, "", true},
		{`{"model":"first","messages":[],"model":"la`, "", false}, // the last is cut: unknown
		{`{"model":"first","messages":[],"model":`, "", false},
		{`{"model":"first","messages":[],"mod`, "first", false},
	} {
		got, ok := headModel([]byte(tc.head))
		if string(got) != tc.want || ok == tc.bad {
			t.Errorf("headModel(%q) = %q, %v; want %q, %v", tc.head, got, ok, tc.want, !tc.bad)
		}
	}
}

// FuzzHeadModel: on any head no panic, and on a complete JSON object without escapes the
// "model" found is encoding/json's, where the last duplicate wins too.
func FuzzHeadModel(f *testing.F) {
	for _, s := range []string{`{"model":"m1","messages":[]}`, `{"stream":true,"model":"x"}`, `{"a":{"model":"no"},"model":"yes"}`, `{"model":"\n"}`, `[1]`, `{`, `{"model":"a","model":"b"}`, `{"model":"a","model":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _ := headModel(b)
		var v map[string]json.RawMessage
		// encoding/json: the last duplicate wins; it decodes escapes and replaces invalid UTF-8, which headModel leaves alone
		if json.Unmarshal(b, &v) != nil || bytes.IndexByte(b, '\\') >= 0 || !utf8.Valid(b) {
			return
		}
		var want string
		if raw, ok := v["model"]; !ok || json.Unmarshal(raw, &want) != nil || bytes.IndexByte(raw, '\\') >= 0 {
			return
		}
		if string(got) != want {
			t.Fatalf("headModel(%q) = %q, want %q", b, got, want)
		}
	})
}

// rawWorker is a worker that is only a listener: the test reads (or does not read) what the
// gateway sends it.
func rawWorker(t *testing.T) (*fakeWorker, <-chan net.Conn) {
	fw := &fakeWorker{name: "raw", ln: newTestListener(t)}
	conns := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := fw.ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			conns <- c
		}
	}()
	t.Cleanup(func() { fw.ln.Close() })
	return fw, conns
}

// streamedRequestHead is the head of a chat request with a body of n bytes.
func streamedRequestHead(n int) string {
	return "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: " + itoa(n) + "\r\n\r\n"
}

// TestStreamedBodyWaitsForASlowWorker: a worker that does not read holds the client back
// (backpressure): the client's writes stall long before its 64 MiB body is sent, so the
// gateway did not take the body in; once the worker reads, the body arrives whole and the
// answer reaches the client.
func TestStreamedBodyWaitsForASlowWorker(t *testing.T) {
	fw, conns := rawWorker(t)
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 64 << 10, MaxPayloadSize: 128 << 20}, fw)
	const size = 64 << 20
	body := []byte(bigChat(size - len(bigChat(0))))
	client, err := net.Dial("tcp", g.serveTCP())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Write([]byte(streamedRequestHead(len(body)))); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for sent < len(body) { // until a write stalls: nobody takes the bytes any more
		_ = client.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := client.Write(body[sent:min(sent+256<<10, len(body))])
		sent += n
		if err != nil {
			break
		}
	}
	if sent >= len(body) {
		t.Fatalf("the client sent all %d MiB to a worker that reads nothing: the gateway buffered the body", size>>20)
	}
	t.Logf("the client stalled after %d of %d MiB", sent>>20, size>>20)

	worker := <-conns
	got := make(chan []byte, 1)
	go func() { // the worker now reads the whole request and answers
		r := bufio.NewReader(worker)
		var req []byte
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				got <- nil
				return
			}
			if line == "\r\n" {
				break
			}
		}
		req = make([]byte, len(body))
		if _, err := io.ReadFull(r, req); err != nil {
			got <- nil
			return
		}
		got <- req
		fmt.Fprintf(worker, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(okBody), okBody)
	}()
	_ = client.SetWriteDeadline(time.Time{})
	if _, err := client.Write(body[sent:]); err != nil {
		t.Fatal(err)
	}
	if req := <-got; !bytes.Equal(req, body) {
		t.Fatalf("the worker got %d bytes, not the body sent", len(req))
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := resp.Read(bufio.NewReader(client)); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("the answer: %v %d", err, resp.StatusCode())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestStreamedBodyClientHangUpCancelsTheWorker: a client that hangs up halfway through its
// streamed body ends the request: the worker's connection is closed before the body is
// complete (the engine sees the request cancelled) and nothing stays in flight.
func TestStreamedBodyClientHangUpCancelsTheWorker(t *testing.T) {
	fw, conns := rawWorker(t)
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096}, fw)
	body := bigChat(1 << 20)
	client, err := net.Dial("tcp", g.serveTCP())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte(streamedRequestHead(len(body)) + body[:len(body)/2])); err != nil {
		t.Fatal(err)
	}
	worker := <-conns
	testutil.Eventually(t, "the request in flight", func() bool { return g.inFlight() == 1 })
	client.Close()
	_ = worker.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, worker)
	if err != nil {
		t.Fatalf("the worker's connection was not closed: %v after %d bytes", err, n)
	}
	if n >= int64(len(body)) {
		t.Fatalf("the worker got %d bytes, the whole body: the client's hang-up did not cut it", n)
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// TestStreamedBodyClientFaults: a streamed body that breaks its chunked encoding, or stops
// arriving for --read-timeout, ends the request as the client's fault: the worker's
// connection is closed before the body is complete, the client gets the gateway's 400 or
// 408, and nothing stays in flight.
func TestStreamedBodyClientFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		send   func(body string) string // what the client sends after the head
		head   func(body string) string
		status int
	}{
		{"broken chunk", func(body string) string {
			return fmt.Sprintf("%x\r\n%s\r\nzz\r\n", len(body)/2, body[:len(body)/2])
		}, func(string) string {
			return "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n"
		}, 400},
		{"stalled body", func(body string) string { return body[:len(body)/2] }, func(body string) string { return streamedRequestHead(len(body)) }, 408},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw, conns := rawWorker(t)
			g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096, ReadTimeout: 300 * time.Millisecond}, fw)
			body := bigChat(64 << 10)
			client, err := net.Dial("tcp", g.serveTCP())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if _, err := client.Write([]byte(tc.head(body) + tc.send(body))); err != nil {
				t.Fatal(err)
			}
			worker := <-conns
			_ = worker.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, worker)
			if err != nil || n >= int64(len(body)) {
				t.Fatalf("the worker's connection: %d bytes, %v; want it closed before the body was complete", n, err)
			}
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseResponse(resp)
			_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
			if err := resp.Read(bufio.NewReader(client)); err != nil || resp.StatusCode() != tc.status {
				t.Fatalf("the answer: %v %d %s, want %d", err, resp.StatusCode(), resp.Body(), tc.status)
			}
			testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
		})
	}
}

// TestStreamedChunkedBodyPastTheLimitIsAbortedAtTheWorker: a chunked body that runs past
// --max-payload-size after the worker got part of it does not reach the worker as a request
// it could run: the worker's connection ends (reset or closed) before the terminating chunk,
// so what it holds is an incomplete request that no HTTP server serves (the body it got
// stops inside a chunk or between two); the client gets 413 and nothing stays in flight.
func TestStreamedChunkedBodyPastTheLimitIsAbortedAtTheWorker(t *testing.T) {
	fw, conns := rawWorker(t)
	const limit = 200_000
	g := newGateway(t, "round_robin", Config{MaxBufferedBody: 4096, MaxPayloadSize: limit}, fw)
	client, err := net.Dial("tcp", g.serveTCP())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	body := bigChat(2 * limit)
	go func() { // 16 KiB chunks until the gateway stops taking them; the terminator never
		for i := 0; i < len(body); i += 16 << 10 {
			part := body[i:min(i+16<<10, len(body))]
			if _, err := fmt.Fprintf(client, "%x\r\n%s\r\n", len(part), part); err != nil {
				return
			}
		}
	}()
	worker := <-conns
	_ = worker.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(worker)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the worker's connection stayed open after the body ran past the limit (%d bytes read)", len(got))
	}
	head, rest, ok := strings.Cut(string(got), "\r\n\r\n")
	if !ok || !strings.Contains(strings.ToLower(head), "transfer-encoding: chunked") {
		t.Fatalf("the worker got %q..., want a chunked request head", got[:min(len(got), 200)])
	}
	if len(rest) == 0 {
		t.Fatal("the worker got no part of the body: the test did not reach the case it is about")
	}
	if strings.Contains(rest, "\r\n0\r\n\r\n") || strings.HasPrefix(rest, "0\r\n") {
		t.Fatalf("the worker got the terminating chunk after %d bytes: a truncated body it would serve as whole", len(rest))
	}
	if decoded := dechunk(t, rest); len(decoded) > limit {
		t.Fatalf("the worker got %d body bytes, past the %d-byte limit", len(decoded), limit)
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := resp.Read(bufio.NewReader(client)); err != nil || resp.StatusCode() != 413 {
		t.Fatalf("the answer: %v %d %s, want 413", err, resp.StatusCode(), resp.Body())
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// dechunk decodes the whole chunks at the start of s, a chunked body that may stop anywhere.
func dechunk(t *testing.T, s string) []byte {
	t.Helper()
	var out []byte
	for {
		line, rest, ok := strings.Cut(s, "\r\n")
		if !ok {
			return out
		}
		var n int
		if _, err := fmt.Sscanf(line, "%x", &n); err != nil {
			t.Fatalf("the worker got a broken chunk size line %q", line)
		}
		if len(rest) < n+2 {
			return append(out, rest[:min(n, len(rest))]...)
		}
		out, s = append(out, rest[:n]...), rest[n+2:]
	}
}
