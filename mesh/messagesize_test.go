package mesh

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
)

// startTreeRouter starts a loopback mesh router over the real gRPC transport that syncs tr's
// registry and trees.
func startTreeRouter(t *testing.T, name string, tr *treeRouter, set *metrics.Set, peers ...string) string {
	t.Helper()
	l := listen(t, "127.0.0.1", 0)
	port := l.Addr().(*net.TCPAddr).Port
	cfg := DefaultConfig()
	cfg.Enable, cfg.ServerName, cfg.Host, cfg.Port, cfg.PeerURLs = true, name, "127.0.0.1", port, peers
	fastRounds(&cfg)
	cfg.Round = 500 * time.Millisecond // the whole burst below lands in one round
	deps := testDeps()
	deps.Registry, deps.Trees, deps.Metrics, deps.Listener = tr.reg, tr.trees, set, l
	m, err := Start(context.Background(), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	tr.node = m.node
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// TestRoundLargerThanTheMessageLimitIsSplit: one round's tree deltas, long prompts past the
// transport's 8 MiB message limit in all, reach the peer whole, split across messages: the
// peer applies every delta and rejects no message (a single message would be refused by its
// codec and the stream closed, stalling worker sync too).
func TestRoundLargerThanTheMessageLimitIsSplit(t *testing.T) {
	a, b := newTreeRouter(t, 0), newTreeRouter(t, 1)
	setA, setB := metrics.NewSet(), metrics.NewSet()
	addrA := startTreeRouter(t, "A", a, setA)
	startTreeRouter(t, "B", b, setB, addrA)
	testutil.Eventually(t, "A and B see each other ALIVE, and A has B's stream", func() bool {
		// Deltas go to the streams open when the round runs: published before, they are lost.
		return memberStatus(a.node, "B") == wire.StatusAlive && memberStatus(b.node, "A") == wire.StatusAlive && hasStream(a.node, "B")
	})
	const deltas, promptBytes = 320, 32 << 10 // 10 MiB in one round
	if deltas*promptBytes <= wire.DefaultMaxMessage {
		t.Fatal("the round must exceed the message limit")
	}
	prompts := make([][]byte, deltas)
	for i := range prompts {
		prompts[i] = []byte(fmt.Sprintf("%05d ", i) + strings.Repeat("long context ", promptBytes/13))
	}
	before := counter(setB, `smg_mesh_tree_deltas_applied_total`)
	for i, p := range prompts {
		a.node.PublishTree("m", wire.TreeText, p, workerURLs[i%len(workerURLs)])
	}
	testutil.Eventually(t, "B applies every delta of the round", func() bool {
		return counter(setB, `smg_mesh_tree_deltas_applied_total`)-before >= deltas
	})
	if n := counter(setB, `smg_mesh_rejected_messages_total`); n != 0 {
		t.Errorf("B rejected %d messages", n)
	}
	if n := counter(setA, `smg_mesh_tree_deltas_dropped_total{reason="stream_busy"}`); n != 0 {
		t.Errorf("A dropped %d deltas on a busy stream", n)
	}
}

// hasStream reports whether n has a sync stream with the peer named name.
func hasStream(n *Node, name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.streams[name] != nil
}

func memberStatus(n *Node, name string) wire.Status {
	for _, m := range n.Members() {
		if m.Name == name {
			return m.Status
		}
	}
	return wire.StatusInit
}

func counter(set *metrics.Set, name string) uint64 {
	return set.GetOrCreateCounter(name).Get()
}

// TestSplitDeltasKeepsOrderAndBudget: every delta goes out once, in order, in messages of at
// most the budget; the first keeps its requests and entries.
func TestSplitDeltasKeepsOrderAndBudget(t *testing.T) {
	var deltas []wire.TreeDelta
	for i := range 100 {
		deltas = append(deltas, wire.TreeDelta{Model: "m", Worker: "http://w:1", Path: []byte(strings.Repeat("x", 1+i*37%900))})
	}
	first := &wire.Sync{From: "A", Entries: []wire.Entry{{Key: "k", Value: make([]byte, 500)}}}
	const budget = 4096
	msgs := splitDeltas(first, entrySize(&first.Entries[0]), deltas, budget)
	if msgs[0] != first || len(first.Entries) != 1 {
		t.Fatal("the first message lost its entries")
	}
	var got []wire.TreeDelta
	for i, m := range msgs {
		size := 0
		for j := range m.Entries {
			size += entrySize(&m.Entries[j])
		}
		for j := range m.Deltas {
			size += deltaSize(&m.Deltas[j])
		}
		if size > budget {
			t.Errorf("message %d holds %d bytes, budget %d", i, size, budget)
		}
		if len(m.Deltas) == 0 && len(m.Entries) == 0 {
			t.Errorf("message %d is empty", i)
		}
		if m.From != "A" {
			t.Errorf("message %d from %q", i, m.From)
		}
		got = append(got, m.Deltas...)
	}
	if len(msgs) < 2 || len(got) != len(deltas) {
		t.Fatalf("%d messages carry %d of %d deltas", len(msgs), len(got), len(deltas))
	}
	for i := range got {
		if string(got[i].Path) != string(deltas[i].Path) {
			t.Fatalf("delta %d out of order", i)
		}
	}
	if one := splitDeltas(&wire.Sync{From: "A"}, 0, deltas[:3], budget); len(one) != 1 || len(one[0].Deltas) != 3 {
		t.Errorf("a small round took %d messages", len(one))
	}
}

// TestDeltaQueueIsBoundedInBytes: deltas past DeltaQueueBytes, and one larger than a message,
// are dropped and counted, not queued; a round frees the queue's bytes.
func TestDeltaQueueIsBoundedInBytes(t *testing.T) {
	net := newMemNet(t)
	net.tune = func(o *Config, _ *Deps) { o.DeltaQueueBytes, o.MaxSyncBytes = 100<<10, 40<<10 }
	a := newTreeRouter(t, 0)
	addTreeNode(net, "a", 0, a)
	set := a.node.deps.Metrics
	path := []byte(strings.Repeat("p", 30<<10))
	for range 5 { // three fit in 100 KiB
		a.node.PublishTree("m", wire.TreeText, path, workerURLs[0])
	}
	a.node.PublishTree("m", wire.TreeText, []byte(strings.Repeat("q", 50<<10)), workerURLs[0])
	if n := counter(set, `smg_mesh_tree_deltas_dropped_total{reason="queue_full"}`); n != 2 {
		t.Errorf("dropped for the byte bound: %d, want 2", n)
	}
	if n := counter(set, `smg_mesh_tree_deltas_dropped_total{reason="too_large"}`); n != 1 {
		t.Errorf("dropped as too large: %d, want 1", n)
	}
	a.node.mu.Lock()
	taken := a.node.trees.takeBatchesLocked()
	a.node.mu.Unlock()
	if len(taken) != 1 { // the three are one (model, kind, path, worker)
		t.Errorf("round took %d deltas, want 1", len(taken))
	}
	if q := a.node.trees.queuedBytes.Load(); q != 0 {
		t.Errorf("queue still holds %d bytes after the round", q)
	}
}
