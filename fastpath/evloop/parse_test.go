package evloop

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
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			var scratch []byte
			n, err := parseRequest([]byte(tc.in), &r, &scratch, 1024, 100)
			if tc.status != 0 {
				pe, ok := err.(*ParseError)
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
	if _, err := parseRequest([]byte(in), &r, &scratch, 1024, 100); err != nil {
		t.Fatal(err)
	}
	if string(r.Header("X-Smg-Routing-KEY")) != "abc" || string(r.Header("x-request-id")) != "r1" || r.Header("cookie") != nil {
		t.Fatalf("%q %q", r.Header("x-smg-routing-key"), r.Header("x-request-id"))
	}
}

func TestBodyDecoderFramings(t *testing.T) {
	chunked := "5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\nT: 1\r\n\r\n"
	for _, tc := range []struct {
		name, head, body, want string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "hello", "hello"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunked, "hello, world"},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "", ""},
	} {
		// Every split of the body into two reads decodes the same.
		for cut := 0; cut <= len(tc.body); cut++ {
			var h respHead
			n, err := parseResponseHead([]byte(tc.head), &h)
			if err != nil || n != len(tc.head) {
				t.Fatalf("%s: head %d %v", tc.name, n, err)
			}
			var d bodyDecoder
			d.init(&h)
			out, used1, done, err := d.decode([]byte(tc.body[:cut]), nil)
			if err != nil {
				t.Fatalf("%s/%d: %v", tc.name, cut, err)
			}
			if !done {
				var used2 int
				out, used2, done, err = d.decode([]byte(tc.body[cut:]), out)
				used1 += used2
			}
			if err != nil || !done || string(out) != tc.want || used1 != len(tc.body) {
				t.Fatalf("%s/%d: %q done %v used %d err %v", tc.name, cut, out, done, used1, err)
			}
		}
	}
}

func TestRelayedChunkFraming(t *testing.T) {
	dst, mark := beginChunk([]byte("x"))
	dst = endChunk(dst, mark)
	if string(dst) != "x" {
		t.Fatalf("an empty chunk must vanish: %q", dst)
	}
	dst, mark = beginChunk(nil)
	dst = append(dst, "data: a\n\n"...)
	if got := string(endChunk(dst, mark)); got != "000009\r\ndata: a\n\n\r\n" {
		t.Fatalf("%q", got)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"))
	f.Add([]byte("GET http://h/x?y HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Request
		var scratch []byte
		n, err := parseRequest(in, &r, &scratch, 4096, 4096)
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
	})
}

func FuzzResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"), 3)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), 10)
	f.Add([]byte("HTTP/1.0 500 Oops\r\n\r\nbody"), 1)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		var h respHead
		n, err := parseResponseHead(in, &h)
		if err != nil || n == 0 {
			return
		}
		body := in[n:]
		if cut < 0 || cut > len(body) {
			cut = len(body) / 2
		}
		// Decoding in one piece and in two must agree.
		var d1, d2 bodyDecoder
		d1.init(&h)
		d2.init(&h)
		whole, used, done, err := d1.decode(body, nil)
		if err != nil {
			return
		}
		split, used2, done2, err2 := d2.decode(body[:cut], nil)
		if err2 == nil && !done2 {
			var u int
			split, u, done2, err2 = d2.decode(body[cut:], split)
			used2 += u
		}
		if err2 != nil || done != done2 || used != used2 || !bytes.Equal(whole, split) {
			t.Fatalf("whole %q/%d/%v, split at %d %q/%d/%v/%v", whole, used, done, cut, split, used2, done2, err2)
		}
	})
}
