package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
)

// hangingTransport answers every call at once except direct pings of hangAddr, which hang
// as a frozen router's do, until their context ends or the test does. It records whether a
// ping-req went out while such a ping was pending. With helpersHang, ping-reqs hang too, as
// they do when the helpers' pings of a frozen router hang.
type hangingTransport struct {
	hangAddr    string
	helpersHang bool
	release     chan struct{}

	mu              sync.Mutex
	pending         int // calls hanging now
	reqWhilePending bool
}

func (h *hangingTransport) Ping(ctx context.Context, addr string, _ *wire.Ping) (*wire.Ack, error) {
	if addr != h.hangAddr {
		return &wire.Ack{From: "other", OK: true}, nil
	}
	h.hang(ctx)
	return nil, errUnreachable
}

// hang blocks until ctx ends or the test does.
func (h *hangingTransport) hang(ctx context.Context) {
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
}

func (h *hangingTransport) hanging() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending
}

func (h *hangingTransport) PingReq(ctx context.Context, _ string, _ *wire.PingReq) (*wire.Ack, error) {
	h.mu.Lock()
	h.reqWhilePending = h.reqWhilePending || h.pending > 0
	h.mu.Unlock()
	if h.helpersHang {
		h.hang(ctx)
		return nil, errUnreachable
	}
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
	deps := testDeps() // Spawn: goroutines
	deps.Transport, deps.Clock = tr, clk
	n, err := NewNode(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	n.merge([]wire.Member{{Name: "t", Addr: addrOf(1), Status: wire.StatusAlive}, {Name: "h", Addr: addrOf(2), Status: wire.StatusAlive}})

	done := make(chan struct{})
	go func() { n.probe(t.Context(), "t"); close(done) }()
	testutil.Eventually(t, "the direct ping hangs", func() bool { return tr.hanging() == 1 && clk.Waiting() > 0 })
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

// TestProbeOfAFrozenRouterFailsAtTheRound: a router that accepts calls and never answers (a
// frozen process) fails the probe once the node's clock passes one Round, however long
// RequestTimeout, the sync exchanges' bound, is: it is SUSPECTED, and the calls still
// hanging on it (the direct ping, the helpers' ping-reqs) are cancelled.
func TestProbeOfAFrozenRouterFailsAtTheRound(t *testing.T) {
	clk := clock.NewFake()
	tr := &hangingTransport{hangAddr: addrOf(1), helpersHang: true, release: make(chan struct{})}
	t.Cleanup(func() { close(tr.release) })
	cfg := nodeConfig(t, "a", addrOf(0))
	cfg.RequestTimeout = time.Hour
	deps := testDeps() // Spawn: goroutines
	deps.Transport, deps.Clock = tr, clk
	n, err := NewNode(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	n.merge([]wire.Member{
		{Name: "t", Addr: addrOf(1), Status: wire.StatusAlive},
		{Name: "h1", Addr: addrOf(2), Status: wire.StatusAlive}, {Name: "h2", Addr: addrOf(3), Status: wire.StatusAlive},
	})

	done := make(chan struct{})
	go func() { n.probe(t.Context(), "t"); close(done) }()
	testutil.Eventually(t, "the direct ping hangs", func() bool { return tr.hanging() == 1 && clk.Waiting() > 0 })
	clk.Advance(cfg.ProbeTimeout)
	testutil.Eventually(t, "both helpers are asked and hang too", func() bool { return tr.hanging() == 3 })
	if s := memberStatus(n, "t"); s != wire.StatusAlive {
		t.Fatalf("t is %v before the probe's deadline", s)
	}
	clk.Advance(cfg.Round - cfg.ProbeTimeout)
	testutil.Eventually(t, "the probe ends at its deadline on the node's clock", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if s := memberStatus(n, "t"); s != wire.StatusSuspected {
		t.Fatalf("t is %v after a probe that reached nobody, want SUSPECTED", s)
	}
	testutil.Eventually(t, "the calls still hanging are cancelled", func() bool { return tr.hanging() == 0 })
}
