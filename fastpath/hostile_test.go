package fastpath

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// rawRequest writes raw on a new connection to g and returns the first response's status
// line and body (up to 64 KiB).
func rawRequest(t *testing.T, g *gateway, raw string) (string, string) {
	t.Helper()
	c, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = io.WriteString(c, raw) }()
	return readResponse(t, c)
}

func readResponse(t *testing.T, c net.Conn) (string, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("headers: %v", err)
		}
		if line == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length: "); ok {
			fmt.Sscan(v, &length)
		}
	}
	body := make([]byte, min(length, 64<<10))
	_, _ = io.ReadFull(br, body)
	return strings.TrimSpace(status), string(body)
}

// TestLargeBodyArrivesWhole: a body far larger than the first read buffer, sent with a
// Content-Length or chunked, reaches the worker byte for byte.
func TestLargeBodyArrivesWhole(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	fw.bodies = make(chan []byte, 4)
	g := newGateway(t, "round_robin", Config{}, fw)
	body := `{"model":"m1","messages":[{"role":"user","content":"` + strings.Repeat("x", 300_000) + `"}]}`
	if r := g.do("POST", "/v1/chat/completions", body); r.StatusCode() != 200 {
		t.Fatalf("status %d: %s", r.StatusCode(), r.Body())
	}
	if got := <-fw.bodies; string(got) != body {
		t.Fatalf("worker got %d bytes, want the %d sent", len(got), len(body))
	}
	// Chunked: the same body in 3 chunks.
	chunked := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, part := range []string{body[:10], body[10:200_000], body[200_000:]} {
		chunked += fmt.Sprintf("%x\r\n%s\r\n", len(part), part)
	}
	chunked += "0\r\n\r\n"
	if status, b := rawRequest(t, g, chunked); !strings.Contains(status, " 200") {
		t.Fatalf("chunked: %s %s", status, b)
	}
	if got := <-fw.bodies; string(got) != body {
		t.Fatalf("worker got %d bytes of the chunked body, want %d", len(got), len(body))
	}
}

// TestBodyLimitsAnswer413: a declared length past --max-payload-size is refused before any
// byte of the body is read, and a chunked body is cut as soon as it passes the limit.
func TestBodyLimitsAnswer413(t *testing.T) {
	g := newGateway(t, "round_robin", Config{MaxPayloadSize: 10_000}, newFakeWorker(t, "a", 200))
	status, body := rawRequest(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 500000000\r\n\r\n{")
	if !strings.Contains(status, " 413") || !strings.Contains(body, "payload_too_large") {
		t.Fatalf("declared 500 MB: %s %s", status, body)
	}
	big := strings.Repeat("y", 20_000)
	status, body = rawRequest(t, g, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(big), big))
	if !strings.Contains(status, " 413") {
		t.Fatalf("chunked 20 kB past a 10 kB limit: %s %s", status, body)
	}
	if r := g.do("POST", "/v1/chat/completions", chatBody); r.StatusCode() != 200 {
		t.Fatalf("a normal request after the refusals: %d", r.StatusCode())
	}
}

// TestBodyMemoryBudgetRefusesPastIt: bodies being read share --max-request-body-memory; a
// request that would take the total past it gets 503 at once, and the budget comes back
// when the held bodies end.
func TestBodyMemoryBudgetRefusesPastIt(t *testing.T) {
	g := newGateway(t, "round_robin", Config{MaxPayloadSize: 1 << 20, MaxBodyMemory: 1 << 20}, newFakeWorker(t, "a", 200))
	// Each stalled client sends 600 kB of a declared 1 MB: past 512 KiB its buffer (doubling
	// from 4 KiB) grows to the declared 1 MB, which the budget has room for only once.
	var held []net.Conn
	for range 2 {
		c, err := g.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000000\r\n\r\n"+strings.Repeat("z", 600_000))
		}()
		held = append(held, c)
	}
	// One of the two is refused with 503 once both have sent their 600 kB.
	refused := make(chan string, 2)
	for _, c := range held {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			refused <- line
		}()
	}
	if line := <-refused; !strings.Contains(line, " 503") {
		t.Fatalf("past the budget: %q, want 503", line)
	}
	testutil.Eventually(t, "the refused body's bytes back in the budget", func() bool { return g.srv.bodies.used.Load() <= 1_000_000 })
	held[0].Close()
	held[1].Close()
	testutil.Eventually(t, "the budget empty once the stalled clients left", func() bool { return g.srv.bodies.used.Load() == 0 })
	if r := g.do("POST", "/v1/chat/completions", chatBody); r.StatusCode() != 200 {
		t.Fatalf("a normal request after: %d", r.StatusCode())
	}
}

// TestHeaderLimit: a 40 KB cookie passes under the default 64 KiB limit; past the limit the
// answer is 431.
func TestHeaderLimit(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	if r := g.do("POST", "/v1/chat/completions", chatBody, "Cookie", strings.Repeat("c", 40_000)); r.StatusCode() != 200 {
		t.Fatalf("40 KB cookie: %d %s", r.StatusCode(), r.Body())
	}
	status, body := rawRequest(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nCookie: "+strings.Repeat("c", 70_000)+"\r\nContent-Length: 2\r\n\r\n{}")
	if !strings.Contains(status, " 431") || !strings.Contains(body, "--max-header-size") {
		t.Fatalf("70 KB cookie: %s %s", status, body)
	}
}

// TestMalformedRequestAnswerHasNoSecret: fasthttp's parse errors quoted the raw request,
// Authorization included, in the 400 body.
func TestMalformedRequestAnswerHasNoSecret(t *testing.T) {
	g := newGateway(t, "round_robin", Config{}, newFakeWorker(t, "a", 200))
	status, body := rawRequest(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-very-secret\r\nContent-Length: nope\r\n\r\n{}")
	if !strings.Contains(status, " 400") || strings.Contains(body, "sk-very-secret") {
		t.Fatalf("%s %s", status, body)
	}
}

// TestHopHeaderRefusesALoop: a request that already went through this gateway gets 508;
// one that went through other gateways is forwarded with this gateway added to the list.
func TestHopHeaderRefusesALoop(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	fw.bodies = make(chan []byte, 4)
	g := newGateway(t, "round_robin", Config{}, fw)
	own := string(g.srv.hopID)
	r := g.do("POST", "/v1/chat/completions", chatBody, "X-SMG-Hop", "aaaa, "+own)
	if r.StatusCode() != 508 || string(r.Header.Peek("X-SMG-Error-Code")) != "forwarding_loop" {
		t.Fatalf("looped request: %d %s", r.StatusCode(), r.Body())
	}
	select {
	case <-fw.bodies:
		t.Fatal("the looped request reached the worker")
	default:
	}
	if r := g.do("POST", "/v1/chat/completions", chatBody, "X-SMG-Hop", "aaaa"); r.StatusCode() != 200 {
		t.Fatalf("a request from another gateway: %d", r.StatusCode())
	}
	<-fw.bodies
	if r := g.do("POST", "/v1/chat/completions", chatBody, "X-SMG-Hop", strings.Repeat("b", 2000)); r.StatusCode() != 508 {
		t.Fatalf("an oversized hop list: %d", r.StatusCode())
	}
}

func TestIsListenAddress(t *testing.T) {
	for _, c := range []struct {
		url  string
		host string
		port int
		want bool
	}{
		{"http://127.0.0.1:30000", "127.0.0.1", 30000, true},
		{"http://localhost:30000", "127.0.0.1", 30000, true},
		{"http://127.0.0.1:30001", "127.0.0.1", 30000, false},
		{"http://127.0.0.2:30000", "127.0.0.1", 30000, false},
		{"http://127.0.0.2:30000", "0.0.0.0", 30000, true},
		{"http://[::1]:30000", "0.0.0.0", 30000, true},
		{"http://localhost:80", "0.0.0.0", 80, true},
		{"http://192.0.2.10:30000", "0.0.0.0", 30000, false}, // TEST-NET: not this host
		{"http://127.0.0.1:30000", "127.0.0.1", 0, false},
	} {
		if got := IsListenAddress(context.Background(), c.url, c.host, c.port); got != c.want {
			t.Errorf("IsListenAddress(%s, %s:%d) = %v", c.url, c.host, c.port, got)
		}
	}
}

// TestChunkedLimitHoldsOnAConnectionWithALargeBuffer: a chunked body past
// --max-payload-size is refused even on a kept-alive connection whose read buffer an earlier
// request grew past the limit (a 40 KB header against a 10 kB body limit), where no growth
// step of the body's buffer would notice it.
func TestChunkedLimitHoldsOnAConnectionWithALargeBuffer(t *testing.T) {
	g := newGateway(t, "round_robin", Config{MaxPayloadSize: 10_000}, newFakeWorker(t, "a", 200))
	c, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cookie := strings.Repeat("c", 40_000)
	if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nCookie: %s\r\nContent-Length: %d\r\n\r\n%s", cookie, len(chatBody), chatBody); err != nil {
		t.Fatal(err)
	}
	if status, body := readResponse(t, c); !strings.Contains(status, " 200") {
		t.Fatalf("a 40 KB header first: %s %s", status, body)
	}
	big := strings.Repeat("y", 20_000)
	go func() {
		_, _ = fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(big), big)
	}()
	if status, body := readResponse(t, c); !strings.Contains(status, " 413") {
		t.Fatalf("then chunked 20 kB past a 10 kB limit on the same connection: %s %s", status, body)
	}
}

// TestFirstByteTimeoutRetriesElsewhere: a worker that does not start its answer within
// --first-byte-timeout-secs is cut and the request is served by another worker.
func TestFirstByteTimeoutRetriesElsewhere(t *testing.T) {
	slow, fast := newFakeWorker(t, "slow", 200), newFakeWorker(t, "fast", 200)
	slow.delay = 5 * time.Second
	g := newGateway(t, "round_robin", Config{FirstByteTimeout: 200 * time.Millisecond, Retry: DefaultRetryConfig()}, slow, fast)
	for range 2 { // round robin: one of the two requests is first sent to the slow worker
		r := g.do("POST", "/v1/chat/completions", chatBody)
		if r.StatusCode() != 200 || string(r.Header.Peek("X-Mock-Worker-Id")) != "fast" {
			t.Fatalf("%d from %q: %s", r.StatusCode(), r.Header.Peek("X-Mock-Worker-Id"), r.Body())
		}
	}
	testutil.Eventually(t, "in-flight 0", func() bool { return g.inFlight() == 0 })
}

// TestFirstByteTimeoutDoesNotCutAStream: once a stream has started, its body may take longer
// than the first-byte timeout (fasthttp reads it under the deadline of its headers, which the
// gateway moves to the request's own).
func TestFirstByteTimeoutDoesNotCutAStream(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{FirstByteTimeout: 300 * time.Millisecond}, fw)
	conn, br := openStream(t, g)
	defer conn.Close()
	fw.events <- `{"n":1}`
	if got := readEvent(t, br); got != "data: {\"n\":1}\n\n" {
		t.Fatalf("first event %q", got)
	}
	time.Sleep(900 * time.Millisecond) // three first-byte timeouts
	fw.events <- `{"n":2}`
	if got := readEvent(t, br); got != "data: {\"n\":2}\n\n" {
		t.Fatalf("an event after the first-byte timeout: %q", got)
	}
	close(fw.events)
	if got := readEvent(t, br); got != "data: [DONE]\n\n" {
		t.Fatalf("last event %q", got)
	}
}
