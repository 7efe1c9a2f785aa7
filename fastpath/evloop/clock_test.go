package evloop

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
)

// TestFakeClockDrivesTheDeadline: the loops keep their deadlines on Config.Clock, so a
// request to a worker that never answers, with an hour's deadline on a fake clock, is cut
// when the test advances that clock by the hour, not before.
func TestFakeClockDrivesTheDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan struct{}, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		received <- struct{}{}
		_, _ = io.Copy(io.Discard, c) // never answers
	}()
	fake := clock.NewFake()
	p := &proxy{addr: ln.Addr().String(), deadline: time.Hour}
	addr := startProxy(t, p, func(c *Config) { c.Loops, c.Clock = 1, fake })
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Post("http://"+addr+"/x", "application/json", strings.NewReader("{}"))
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{status: resp.StatusCode}
	}()
	<-received
	fake.Advance(59 * time.Minute)
	select {
	case r := <-done:
		t.Fatalf("the request ended before its deadline on the fake clock: %+v", r)
	default:
	}
	if p.fails.Load() != 0 {
		t.Fatal("the attempt failed before its deadline on the fake clock")
	}
	fake.Advance(time.Minute)
	r := <-done
	if r.err != nil || r.status != 502 || p.fails.Load() != 1 {
		t.Fatalf("after the deadline: status %d, error %v, %d failed attempts; want 502 and 1", r.status, r.err, p.fails.Load())
	}
}
