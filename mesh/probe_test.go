package mesh

import (
	"context"
	"sync"
	"testing"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
)

// hangingTransport answers every call at once except direct pings of hangAddr, which hang
// as a frozen router's do, until their context ends or the test does. It records whether a
// ping-req went out while such a ping was pending.
type hangingTransport struct {
	hangAddr string
	release  chan struct{}

	mu              sync.Mutex
	pending         int
	reqWhilePending bool
}

func (h *hangingTransport) Ping(ctx context.Context, addr string, _ *wire.Ping) (*wire.Ack, error) {
	if addr != h.hangAddr {
		return &wire.Ack{From: "other", OK: true}, nil
	}
	h.mu.Lock()
	h.pending++
	h.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-h.release:
	}
	h.mu.Lock()
	h.pending--
	h.mu.Unlock()
	return nil, errUnreachable
}

func (h *hangingTransport) PingReq(context.Context, string, *wire.PingReq) (*wire.Ack, error) {
	h.mu.Lock()
	h.reqWhilePending = h.reqWhilePending || h.pending > 0
	h.mu.Unlock()
	return &wire.Ack{From: "helper", OK: true}, nil
}

func (h *hangingTransport) OpenSync(context.Context, string, Handler) (Stream, error) {
	return nil, errUnreachable
}

// TestProbeAsksHelpersWhileTheDirectPingHangs: a direct ping unanswered within ProbeTimeout
// is tried through the helpers at once, while it is still pending, so a router whose
// direct path hangs but which a helper reaches stays ALIVE without a RequestTimeout's wait.
func TestProbeAsksHelpersWhileTheDirectPingHangs(t *testing.T) {
	clk := clock.NewFake()
	tr := &hangingTransport{hangAddr: addrOf(1), release: make(chan struct{})}
	t.Cleanup(func() { close(tr.release) })
	cfg := nodeConfig(t, "a", addrOf(0))
	n, err := NewNode(cfg, Deps{Transport: tr, Clock: clk, Logger: testutil.Quiet}) // Spawn: goroutines
	if err != nil {
		t.Fatal(err)
	}
	n.merge([]wire.Member{{Name: "t", Addr: addrOf(1), Status: wire.StatusAlive}, {Name: "h", Addr: addrOf(2), Status: wire.StatusAlive}})

	done := make(chan struct{})
	go func() { n.probe(t.Context(), "t"); close(done) }()
	testutil.Eventually(t, "the probe waits on its ProbeTimeout", func() bool { return clk.Waiting() > 0 })
	clk.Advance(cfg.ProbeTimeout)
	<-done
	tr.mu.Lock()
	asked := tr.reqWhilePending
	tr.mu.Unlock()
	if !asked {
		t.Fatal("the helpers were asked only after the direct ping failed")
	}
	if s := memberStatus(n, "t"); s != wire.StatusAlive {
		t.Fatalf("t is %v although a helper reached it", s)
	}
}
