package worker

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dialed.Close(); accepted.Close() })
	return dialed, accepted
}

// TestWatchedReadEndsWhenTheClientLeaves: a round trip waiting for a worker that never
// answers ends with ErrClientLeft once its client has closed its connection, and a client
// that stays does not end it.
func TestWatchedReadEndsWhenTheClientLeaves(t *testing.T) {
	up, _ := tcpPair(t)                   // the worker side never writes
	clientSide, gatewaySide := tcpPair(t) // the gateway's client connection
	c := &conn{Conn: up}
	var resp fasthttp.Response
	resp.ParseNetConn(c)
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	// The client is there: the wait goes on until the round trip's own deadline.
	Watch(&resp, gatewaySide, nil)
	if err := c.SetReadDeadline(time.Now().Add(3 * watchInterval)); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := c.Read(make([]byte, 16)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("with the client there: %v, want the deadline's timeout", err)
	}

	// The client leaves: the wait ends with ErrClientLeft.
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	Watch(&resp, gatewaySide, nil)
	clientSide.Close()
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, ErrClientLeft) {
		t.Fatalf("after the client left: %v, want ErrClientLeft", err)
	}
}

// TestWatchedReadIsCutWhenTheWorkerIsUnresponsive: a round trip waiting for a worker's first
// byte ends with ErrWorkerUnresponsive once worker/stall found the worker unresponsive, and
// not while it is only silent (its waits go on).
func TestWatchedReadIsCutWhenTheWorkerIsUnresponsive(t *testing.T) {
	up, _ := tcpPair(t) // the worker side never writes
	_, gatewaySide := tcpPair(t)
	w := &Worker{}
	c := &conn{Conn: up, w: w}
	var resp fasthttp.Response
	resp.ParseNetConn(c)

	w.SetStallState(StallSilent)
	Watch(&resp, gatewaySide, nil)
	if err := c.SetReadDeadline(time.Now().Add(3 * watchInterval)); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := c.Read(make([]byte, 16)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("silent worker: %v, want the deadline's timeout", err)
	}

	w.SetStallState(StallUnresponsive)
	Watch(&resp, gatewaySide, nil)
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, ErrWorkerUnresponsive) {
		t.Fatalf("unresponsive worker: %v, want ErrWorkerUnresponsive", err)
	}
}

// TestFirstByteAccounting: silence counts from the last first byte while requests wait, is 0
// when none waits, and a first byte clears a stall state and is counted for the typical time.
func TestFirstByteAccounting(t *testing.T) {
	w := &Worker{}
	if w.Silence(100) != 0 {
		t.Fatal("silence with nothing waiting")
	}
	w.NoteSent(1_000)
	w.NoteSent(2_000) // a second request does not restart the silence
	if got := w.Silence(5_000); got != 4_000 {
		t.Fatalf("silence %v, want 4µs", got)
	}
	w.SetStallState(StallUnresponsive)
	w.NoteFirstByte(2_000, 6_000)
	if w.StallState() != StallNone || w.Silence(7_000) != 1_000 || w.Waiting() != 1 {
		t.Fatalf("after a first byte: state %d silence %v waiting %d", w.StallState(), w.Silence(7_000), w.Waiting())
	}
	w.NoteNoFirstByte()
	if w.Silence(9_000) != 0 {
		t.Fatal("silence with nothing waiting any more")
	}
	if sum, n := w.TakeFirstByteTimes(); sum != 4_000 || n != 1 {
		t.Fatalf("first-byte times %v/%d, want 4µs/1", sum, n)
	}
	if sum, n := w.TakeFirstByteTimes(); sum != 0 || n != 0 {
		t.Fatal("TakeFirstByteTimes did not start anew")
	}
}

// saysWhenLeft is a client connection that knows itself when its client left, as the event
// loops' bridge does (no socket of its own).
type saysWhenLeft struct {
	net.Conn
	gone atomic.Bool
}

func (s *saysWhenLeft) ClientLeft() bool { return s.gone.Load() }

// TestWatchedReadAsksAConnectionThatSaysWhenItsClientLeft: Watch takes the word of a
// connection that says when its client left.
func TestWatchedReadAsksAConnectionThatSaysWhenItsClientLeft(t *testing.T) {
	up, _ := tcpPair(t)
	c := &conn{Conn: up}
	var resp fasthttp.Response
	resp.ParseNetConn(c)
	client := &saysWhenLeft{}
	if err := c.SetReadDeadline(time.Now().Add(3 * watchInterval)); err != nil {
		t.Fatal(err)
	}
	Watch(&resp, client, nil)
	var ne net.Error
	if _, err := c.Read(make([]byte, 16)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("with the client there: %v, want the deadline's timeout", err)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	Watch(&resp, client, nil)
	client.gone.Store(true)
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, ErrClientLeft) {
		t.Fatalf("after the client left: %v, want ErrClientLeft", err)
	}
}

// TestWatchedReadGivesUpWhenCancelled: a watched round trip whose request gives it up (a PD
// leg whose other leg failed) ends with ErrCancelled, which Cause reports in place of the
// error fasthttp makes of any failure on the first byte.
func TestWatchedReadGivesUpWhenCancelled(t *testing.T) {
	up, _ := tcpPair(t) // the worker side never writes
	c := &conn{Conn: up}
	var resp fasthttp.Response
	resp.ParseNetConn(c)
	var cancel atomic.Bool
	Watch(&resp, nil, &cancel)
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	cancel.Store(true)
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled: %v, want ErrCancelled", err)
	}
	if err := Cause(&resp, fasthttp.ErrConnectionClosed); !errors.Is(err, ErrCancelled) {
		t.Fatalf("Cause: %v, want ErrCancelled", err)
	}
	Watch(&resp, nil, nil) // the next round trip starts with no reason to give
	if err := Cause(&resp, fasthttp.ErrConnectionClosed); err != fasthttp.ErrConnectionClosed {
		t.Fatalf("Cause after a new watch: %v", err)
	}
}

// TestWatchedReadKeepsTheRoundTripsDeadline: the last slice of a watch waits until the round
// trip's own deadline, not the previous slice's (which cut tries up to a slice early).
func TestWatchedReadKeepsTheRoundTripsDeadline(t *testing.T) {
	up, _ := tcpPair(t)
	c := &conn{Conn: up}
	var resp fasthttp.Response
	resp.ParseNetConn(c)
	deadline := time.Now().Add(watchInterval + watchInterval/2)
	if err := c.SetReadDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	Watch(&resp, nil, nil)
	_, err := c.Read(make([]byte, 16))
	if !isTimeout(err) || time.Now().Before(deadline) {
		t.Fatalf("read ended with %v before the round trip's deadline", err)
	}
}

// TestWatchedReadDoesNotAllocate: a watched round trip over a socket, with its client and
// cancel watched, allocates nothing (errors.As's escaping target made it one per round trip).
func TestWatchedReadDoesNotAllocate(t *testing.T) {
	up, worker := tcpPair(t)
	_, gatewaySide := tcpPair(t)
	w := &Worker{}
	c := &conn{Conn: up, w: w}
	var resp fasthttp.Response
	resp.ParseNetConn(c)
	var cancel atomic.Bool
	buf, msg := make([]byte, 16), []byte("x")
	if n := testing.AllocsPerRun(100, func() {
		Watch(&resp, gatewaySide, &cancel)
		if _, err := worker.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per watched read", n)
	}
}
