package fastpath

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStrictHTTP1Framing: requests a lenient server would read one way and a proxy in front
// another (RFC 9112 §6.3, §3.2, §2.2) get 400 and their connection is closed, so nothing
// hidden behind them is served; a bare-LF head is refused at once, not at the read timeout
// (set to an hour here, so a 400 can only come from the parser).
func TestStrictHTTP1Framing(t *testing.T) {
	fw := newFakeWorker(t, "a", 200)
	g := newGateway(t, "round_robin", Config{ReadTimeout: time.Hour}, fw)
	smuggled := "GET /workers HTTP/1.1\r\nHost: gw\r\n\r\n"
	chunkedEmpty := "0\r\n\r\n"
	for _, tc := range []struct{ name, req string }{
		{"content-length and chunked", "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: " +
			strconv.Itoa(len(chunkedEmpty)+len(smuggled)) + "\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedEmpty + smuggled},
		{"chunked and content-length", "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunkedEmpty + smuggled},
		{"two hosts", "GET /health HTTP/1.1\r\nHost: gw\r\nHost: other\r\n\r\n" + smuggled},
		{"no host", "GET /health HTTP/1.1\r\nX-A: b\r\n\r\n" + smuggled},
		{"bare LF", "GET /health HTTP/1.1\nHost: gw\n\n"},
		{"bare LF after the request line", "GET /health HTTP/1.1\r\nHost: gw\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := g.ln.Dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute)) // a hang guard only: ReadTimeout is an hour
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 400 || !strings.Contains(string(body), "malformed HTTP request") {
				t.Fatalf("status %d body %s, want 400", resp.StatusCode, body)
			}
			if rest, err := io.ReadAll(br); len(rest) != 0 || err != nil {
				t.Fatalf("after the 400 the connection gave %q (%v), want it closed with nothing more", rest, err)
			}
		})
	}
	select {
	case <-fw.served:
		t.Fatal("a refused request reached the worker")
	default:
	}
	// HTTP/1.0 may omit Host; one Host on HTTP/1.1 is served.
	for _, req := range []string{"GET /health HTTP/1.0\r\n\r\n", "GET /health HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"} {
		c, err := g.ln.Dial()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode == 400 {
			t.Fatalf("%q: %v %v", req, resp, err)
		}
		c.Close()
	}
}
