package fastpath

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// TestSlowClientIsCutAtTheReadTimeout: a client that sends half a request and stalls holds
// its connection only until ReadTimeout; the gateway keeps serving others meanwhile.
func TestSlowClientIsCutAtTheReadTimeout(t *testing.T) {
	g := newGateway(t, "round_robin", Config{ReadTimeout: 200 * time.Millisecond}, newFakeWorker(t, "a", 200))
	conn, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Len"); err != nil {
		t.Fatal(err)
	}
	if r := g.do("POST", "/v1/chat/completions", chatBody); r.StatusCode() != 200 {
		t.Fatalf("another client was not served while one stalled: %d", r.StatusCode())
	}
	// The stalled connection is closed by the gateway (after answering 408 or not at all).
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(conn); done <- err }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled client's connection was never closed")
	}
}

// TestConnectionFloodIsRefusedClearly: past MaxConnections a new connection gets a 503 that
// says why, instead of hanging, and the connections already open keep working.
func TestConnectionFloodIsRefusedClearly(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{MaxConnections: 2}, fw)
	var held []net.Conn
	for range 2 { // two clients each hold a connection busy with an unfinished request
		c, err := g.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{")
		held = append(held, c)
	}
	testutil.Eventually(t, "the server serving both connections", func() bool { return g.srv.openConnections() == 2 })
	c, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: gw\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "503") {
		t.Fatalf("a connection past the cap got %q (%v), want a 503", line, err)
	}
	_ = held
}
