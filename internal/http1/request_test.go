package http1

import (
	"bytes"
	"testing"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		n         int // 0: incomplete
		status    int // error status, 0: none
		path      string
		body      string
		keepAlive bool
	}{
		{"simple", "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}", -1, 0, "/v1/chat/completions", "{}", true},
		{"query", "POST /generate?x=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n", -1, 0, "/generate", "", true},
		{"absolute form", "POST http://gw:1/v1/completions HTTP/1.1\r\n\r\n", -1, 0, "/v1/completions", "", true},
		{"http/1.0", "GET /health HTTP/1.0\r\n\r\n", -1, 0, "/health", "", false},
		{"close", "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", -1, 0, "/", "", false},
		{"chunked", "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1;ext=1\r\n \r\n0\r\nTrailer: v\r\n\r\n", -1, 0, "/x", "{} ", true},
		{"partial head", "POST /x HTTP/1.1\r\nContent-Len", 0, 0, "", "", false},
		{"partial body", "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}", 0, 0, "", "", false},
		{"bad line", "POST /x\r\n\r\n", 0, 400, "", "", false},
		{"bad proto", "POST /x HTTP/2.0\r\n\r\n", 0, 400, "", "", false},
		{"space before colon", "POST /x HTTP/1.1\r\nHost : a\r\n\r\n", 0, 400, "", "", false},
		{"conflicting lengths", "POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 0, 400, "", "", false},
		{"bad length", "POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 0, 400, "", "", false},
		{"gzip encoding", "POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 0, 501, "", "", false},
		{"body too large", "POST /x HTTP/1.1\r\nContent-Length: 999\r\n\r\n", 0, 413, "", "", false},
		{"control in value", "POST /x HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", 0, 400, "", "", false},
		// RFC 9112 framing: both lengths, Host lines, bare LF (refused before the head ends).
		{"length and chunked", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, 400, "", "", false},
		{"chunked and length", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 0, 400, "", "", false},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 0, 400, "", "", false},
		{"two hosts on 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 0, 400, "", "", false},
		{"bare LF request line", "GET / HTTP/1.1\nHost: a\n\n", 0, 400, "", "", false},
		{"bare LF header, head incomplete", "GET / HTTP/1.1\r\nHost: a\n", 0, 400, "", "", false},
		{"bare LF in a complete head", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 0, 400, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			var scratch []byte
			n, err := ParseRequest([]byte(tc.in), &r, &scratch, 1024, 100)
			if tc.status != 0 {
				pe, ok := err.(*Error)
				if !ok || pe.Status != tc.status {
					t.Fatalf("err %v, want status %d", err, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.n == 0 {
				if n != 0 {
					t.Fatalf("n %d for an incomplete request", n)
				}
				return
			}
			if n != len(tc.in) || string(r.Path()) != tc.path || string(r.Body()) != tc.body || r.KeepAlive() != tc.keepAlive {
				t.Fatalf("n %d path %q body %q keepAlive %v", n, r.Path(), r.Body(), r.KeepAlive())
			}
		})
	}
}

func TestRequestHeaderLookupIgnoresCase(t *testing.T) {
	var r Request
	var scratch []byte
	in := "POST /x HTTP/1.1\r\nX-SMG-Routing-Key:  abc \r\nx-request-id: r1\r\n\r\n"
	if _, err := ParseRequest([]byte(in), &r, &scratch, 1024, 100); err != nil {
		t.Fatal(err)
	}
	if string(r.Header("X-Smg-Routing-KEY")) != "abc" || string(r.Header("x-request-id")) != "r1" || r.Header("cookie") != nil {
		t.Fatalf("%q %q", r.Header("x-smg-routing-key"), r.Header("x-request-id"))
	}
}

// FuzzParseRequest: the parser never panics, consumes no more than it was given, keeps the
// body within its bound and the views consistent, and a request parses the same whether it
// arrives alone or with another behind it (pipelining). The seeds are the gateway's and the
// mock engines' (testdata/fuzz holds what fuzzing found).
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}",
		"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"GET http://h/x?y HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n",
		"GET /health HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /generate HTTP/1.1\r\nContent-Length: 2\r\nX-Request-Id: r\r\n\r\n{}",
		"POST /g HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;x\r\n{}\r\n0\r\nT: 1\r\n\r\n",
		"POST /g HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n1\r\na\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Request
		var scratch []byte
		n, err := ParseRequest(in, &r, &scratch, 4096, 4096)
		if err != nil || n == 0 {
			return
		}
		if n > len(in) || len(r.Body()) > 4096 {
			t.Fatalf("n %d of %d, body %d", n, len(in), len(r.Body()))
		}
		if !bytes.HasPrefix(r.Target(), r.Path()) || len(r.Method()) == 0 {
			t.Fatalf("target %q path %q", r.Target(), r.Path())
		}
		r.VisitHeaders(func(name, value []byte) {
			if len(name) == 0 || bytes.ContainsAny(value, "\r\n") {
				t.Fatalf("header %q: %q", name, value)
			}
		})
		body, target := string(r.Body()), string(r.Target())
		var again Request
		var scratch2 []byte
		n2, err := ParseRequest(append(bytes.Clone(in[:n]), "GET / HTTP/1.1\r\n\r\n"...), &again, &scratch2, 4096, 4096)
		if err != nil || n2 != n || string(again.Body()) != body || string(again.Target()) != target {
			t.Fatalf("with a request behind it: n %d/%d err %v body %q/%q", n2, n, err, again.Body(), body)
		}
	})
}

// TestMissingHost: an HTTP/1.1 request without Host is reported (the gateway refuses it, the
// mock engines serve it); HTTP/1.0 may omit it.
func TestMissingHost(t *testing.T) {
	for in, want := range map[string]bool{
		"GET / HTTP/1.1\r\n\r\n":                 true,
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n":      false,
		"GET / HTTP/1.0\r\n\r\n":                 false,
		"GET http://a/ HTTP/1.1\r\nX: y\r\n\r\n": true,
	} {
		var r Request
		var scratch []byte
		if n, err := ParseRequest([]byte(in), &r, &scratch, 1024, 100); n != len(in) || err != nil || r.MissingHost() != want {
			t.Errorf("%q: n %d err %v MissingHost %v, want %v", in, n, err, r.MissingHost(), want)
		}
	}
	// A reused Request forgets the previous request's Host.
	var r Request
	var scratch []byte
	_, _ = ParseRequest([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), &r, &scratch, 1024, 100)
	if _, err := ParseRequest([]byte("GET / HTTP/1.1\r\n\r\n"), &r, &scratch, 1024, 100); err != nil || !r.MissingHost() {
		t.Fatalf("reused: err %v MissingHost %v", err, r.MissingHost())
	}
}

// TestParseRequestDoesNotAllocate: a request with headers and a chunked body, the scratch
// buffer warm.
func TestParseRequestDoesNotAllocate(t *testing.T) {
	in := []byte("POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nX-Request-Id: r\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
	var r Request
	var scratch []byte
	parse := func() {
		if n, err := ParseRequest(in, &r, &scratch, 4096, 4096); n != len(in) || err != nil || string(r.Header("x-request-id")) != "r" {
			t.Fatalf("n %d err %v", n, err)
		}
	}
	parse()
	if allocs := testing.AllocsPerRun(100, parse); allocs != 0 {
		t.Fatalf("%.1f allocations per parse, want 0", allocs)
	}
}

// BenchmarkParseRequest parses a typical generation request head and body.
func BenchmarkParseRequest(b *testing.B) {
	in := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nX-Request-Id: r\r\nContent-Length: 2\r\n\r\n{}")
	var r Request
	var scratch []byte
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseRequest(in, &r, &scratch, 64<<10, 1<<20)
	}
}

// TestAppendStatusLine: net/http's reason phrases, a placeholder for a status without one,
// and no allocation.
func TestAppendStatusLine(t *testing.T) {
	for status, want := range map[int]string{
		200: "HTTP/1.1 200 OK\r\n",
		413: "HTTP/1.1 413 Request Entity Too Large\r\n",
		431: "HTTP/1.1 431 Request Header Fields Too Large\r\n",
		503: "HTTP/1.1 503 Service Unavailable\r\n",
		599: "HTTP/1.1 599 Status\r\n",
	} {
		if got := string(AppendStatusLine(nil, status)); got != want {
			t.Errorf("%d: %q, want %q", status, got, want)
		}
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = AppendStatusLine(buf[:0], 429) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// TestHeaderLineLimit: MaxHeaders lines are indexed, one more is ErrTooManyHeaders, whose
// reason says it is the line limit (not the caller's limit in bytes).
func TestHeaderLineLimit(t *testing.T) {
	head := func(n int) []byte {
		b := []byte("GET / HTTP/1.1\r\n")
		for i := range n {
			b = append(b, "X-L: "...)
			b = append(b, byte('a'+i%26))
			b = append(b, "\r\n"...)
		}
		return append(b, "\r\n"...)
	}
	var r Request
	var scratch []byte
	in := head(MaxHeaders)
	if n, err := ParseRequest(in, &r, &scratch, 64<<10, 0); n != len(in) || err != nil || r.NumHeaders() != MaxHeaders {
		t.Fatalf("%d lines: n %d err %v headers %d", MaxHeaders, n, err, r.NumHeaders())
	}
	if MaxHeaders < 256 {
		t.Fatalf("MaxHeaders %d: the documented limit is 256", MaxHeaders)
	}
	if _, err := ParseRequest(head(MaxHeaders+1), &r, &scratch, 64<<10, 0); err != ErrTooManyHeaders || !bytes.Contains([]byte(err.Error()), []byte("header lines")) {
		t.Fatalf("%d lines: %v, want ErrTooManyHeaders", MaxHeaders+1, err)
	}
	if _, err := ParseRequest(head(10), &r, &scratch, 32, 0); err != ErrHeaderTooLarge {
		t.Fatalf("past maxHead: %v, want ErrHeaderTooLarge", err)
	}
}
