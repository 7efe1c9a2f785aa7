package evloop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// detacher answers every request from a goroutine through a detached Stream: the pieces
// given, in order, then Close.
type detacher struct {
	*proxy
	pieces [][]byte
	errs   chan error
}

func (d *detacher) Serve(x *Exchange) {
	st := x.Detach()
	go func() {
		var err error
		for _, p := range d.pieces {
			if _, err = st.Write(p); err != nil {
				break
			}
		}
		st.Close(true)
		d.errs <- err
	}()
}

// TestDetachedStreamKeepsItsOrder: small pieces a detached answer writes straight to the
// socket and a piece larger than the socket takes (queued to the loop) reach the client in
// the order written, whole, while the client reads slowly; the connection then serves
// another request.
func TestDetachedStreamKeepsItsOrder(t *testing.T) {
	var body bytes.Buffer
	pieces := [][]byte{[]byte("first-")}
	for i := range 100 {
		pieces = append(pieces, fmt.Appendf(nil, "small-%03d-", i))
		if i%25 == 0 {
			pieces = append(pieces, bytes.Repeat([]byte{'a' + byte(i%26)}, 1<<20)) // past what the socket takes at once
		}
	}
	for _, p := range pieces {
		body.Write(p)
	}
	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", body.Len())
	d := &detacher{proxy: &proxy{}, pieces: append([][]byte{[]byte(head)}, pieces...), errs: make(chan error, 2)}
	addr := startProxy(t, d.proxy, func(c *Config) { c.Handler = d; c.OutputLimit = 64 << 10 })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for round := range 2 {
		fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, err := io.ReadAll(slowReader{resp.Body})
		if err != nil || !bytes.Equal(got, body.Bytes()) {
			t.Fatalf("round %d: %d bytes (%v), want the %d written in order", round, len(got), err, body.Len())
		}
		if err := <-d.errs; err != nil {
			t.Fatalf("round %d: a write failed: %v", round, err)
		}
	}
}

// TestDetachedStreamSeesTheClientLeave: once the client has gone, the writer's next writes
// fail with ErrClientGone and Left is closed; nothing is written to a descriptor the
// connection no longer owns.
func TestDetachedStreamSeesTheClientLeave(t *testing.T) {
	streams := make(chan *Stream, 1)
	h := &streamHandler{proxy: &proxy{}, streams: streams}
	addr := startProxy(t, h.proxy, func(c *Config) { c.Handler = h })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	st := <-streams
	if _, err := st.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	select {
	case <-st.Left():
	case <-time.After(time.Minute):
		t.Fatal("Left was not closed after the client left")
	}
	if _, err := st.Write([]byte("5\r\nhello\r\n")); err != ErrClientGone {
		t.Fatalf("a write after the client left: %v, want ErrClientGone", err)
	}
	st.Close(false)
}

type streamHandler struct {
	*proxy
	streams chan *Stream
}

func (h *streamHandler) Serve(x *Exchange) { h.streams <- x.Detach() }

// slowReader reads in small steps with pauses, so the socket keeps filling and draining
// while the writer writes: the moments where bytes wait on the loop and the socket has room.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(20 * time.Microsecond)
	return s.r.Read(p[:min(len(p), 16<<10)])
}
