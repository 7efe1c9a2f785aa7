package grpcworker

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// TestFleetClosesAnEnginesClientWhenItsLastRankLeaves: the data-parallel ranks of one engine
// share one client; removing one rank keeps it open for the others, removing the last
// closes it, and a rank registered again dials a fresh client.
func TestFleetClosesAnEnginesClientWhenItsLastRankLeaves(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer() // a real gRPC server serving no service: every RPC is Unimplemented
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	e := NewFleet(DefaultConfig())
	t.Cleanup(func() { _ = e.Close() })
	reg.Subscribe(e.Sync)

	ctx := context.Background()
	add := func(rank string) *worker.Worker {
		spec := worker.Spec{URL: "grpc://" + ln.Addr().String() + "@" + rank, RuntimeType: "sglang"}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := reg.Add(ctx, spec, worker.StatusPending)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// alive: the client still reaches the engine (Unimplemented is the server's answer).
	alive := func(c *Client) bool {
		err := c.HealthCheck(ctx)
		if status.Code(err) == codes.Unimplemented {
			return true
		}
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("HealthCheck: %v, want Unimplemented (open) or ErrClosed (closed)", err)
		}
		return false
	}

	r0, r1 := add("0"), add("1")
	c0, err := e.Client(r0)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := e.Client(r1)
	if err != nil {
		t.Fatal(err)
	}
	if c0 != c1 {
		t.Fatal("two ranks of one engine got two clients")
	}

	if _, err := reg.Remove(ctx, r0.ID); err != nil {
		t.Fatal(err)
	}
	if !alive(c0) {
		t.Fatal("removing rank 0 closed the client rank 1 still uses")
	}
	if c, err := e.Client(r1); err != nil || c != c0 {
		t.Fatalf("rank 1 after rank 0 left: client %p (err %v), want the shared %p", c, err, c0)
	}

	if _, err := reg.Remove(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	if alive(c0) {
		t.Fatal("the engine's client stayed open after its last rank was removed")
	}
	e.mu.Lock()
	left := len(e.clients)
	e.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d clients kept after every worker left", left)
	}

	c, err := e.Client(add("0"))
	if err != nil {
		t.Fatal(err)
	}
	if c == c0 || !alive(c) {
		t.Fatal("a rank registered again did not get a fresh, open client")
	}
}
