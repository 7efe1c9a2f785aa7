package evloop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// The sockets are edge-triggered (loop.readAgain): epoll reports a socket once per arrival,
// and a read that leaves bytes or the peer's FIN behind must be followed by another with no
// new event to prompt it. These tests send whole messages larger than one read, and FINs
// that arrive with the data, and nothing after them.

// rawWorker answers every request on a connection with one write of answer(bodyLen), and
// closes the connection after it when closeAfter.
func rawWorker(t *testing.T, closeAfter bool, answer func(bodyLen int) []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					n, _ := io.Copy(io.Discard, req.Body)
					if _, err := c.Write(answer(int(n))); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestWholeRequestAndAnswerLargerThanOneRead(t *testing.T) {
	const answerLen = 300 << 10 // past a worker connection's 64 KiB read buffer
	up := rawWorker(t, false, func(bodyLen int) []byte {
		head := fmt.Sprintf("HTTP/1.1 200 OK\r\nX-Got: %d\r\nContent-Length: %d\r\n\r\n", bodyLen, answerLen)
		return append([]byte(head), bytes.Repeat([]byte("a"), answerLen)...)
	})
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	c := dialClosed(t, addr)
	br := bufio.NewReader(c)
	for i, bodyLen := range []int{600 << 10, 3000, 100 << 10} { // past the first 4 KiB read, and not
		req := append([]byte(fmt.Sprintf("POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", bodyLen)), bytes.Repeat([]byte("b"), bodyLen)...)
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(b) != answerLen || resp.Header.Get("X-Got") != strconv.Itoa(bodyLen) {
			t.Fatalf("request %d: status %d, %d bytes of %d (%v), worker got %s of %d", i, resp.StatusCode, len(b), answerLen, err, resp.Header.Get("X-Got"), bodyLen)
		}
	}
}

func TestAnswerEndedByTheWorkersFINArrivingWithIt(t *testing.T) {
	up := rawWorker(t, true, func(int) []byte {
		return []byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe whole answer")
	})
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	for i := range 3 {
		resp, err := http.Post("http://"+addr+"/v1/x", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "the whole answer" {
			t.Fatalf("request %d: %q %v", i, b, err)
		}
	}
}

func TestClientFINRightAfterItsRequestEndsTheExchange(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Never answers: only the client's leaving can end the exchange. The body is read first
		// so that net/http watches the connection and ends the handler when the proxy closes it.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	p := &proxy{addr: up}
	addr := startProxy(t, p, nil)
	c := dialClosed(t, addr)
	// The request and the FIN leave together; nothing follows them.
	fmt.Fprintf(c, "POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the exchange ended by the client's leaving", func() bool { return p.gone.Load() == 1 })
	if p.done.Load() != 0 || p.fails.Load() != 0 {
		t.Fatalf("done %d, failed %d: the exchange was not ended by the client's FIN", p.done.Load(), p.fails.Load())
	}
}
