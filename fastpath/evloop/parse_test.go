package evloop

import (
	"bytes"
	"testing"
)

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
