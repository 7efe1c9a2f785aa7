package worker

import (
	"errors"
	"net"
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
	WatchClient(&resp, gatewaySide)
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
	WatchClient(&resp, gatewaySide)
	clientSide.Close()
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, ErrClientLeft) {
		t.Fatalf("after the client left: %v, want ErrClientLeft", err)
	}
}
