package mesh

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

var workerURLs = []string{"http://10.1.0.1:8000", "http://10.1.0.2:8000", "http://10.1.0.3:8000", "http://10.1.0.4:8000"}

// treeRouter is a router's routing side for tree-sync tests: its own registry (workers
// registered in its own order, so tenant indexes differ between routers) and cache_aware
// builder.
type treeRouter struct {
	reg     *worker.Registry
	builder *cacheaware.Builder
	trees   *RadixTrees
	node    *Node
}

func newTreeRouter(t testing.TB, rotate int) *treeRouter {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	for i := range workerURLs {
		spec := worker.Spec{URL: workerURLs[(i+rotate)%len(workerURLs)], ModelID: "m"}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Add(context.Background(), spec, worker.StatusReady); err != nil {
			t.Fatal(err)
		}
	}
	cfg := cacheaware.DefaultConfig()
	cfg.Metrics = metrics.NewSet()
	b := cacheaware.New(cfg, testutil.NewRand(uint64(rotate)+1))
	r := &treeRouter{reg: reg, builder: b}
	r.trees = &RadixTrees{
		Lookup: func(model string) (*radix.TextTree, *radix.TokenTree) {
			if model != "m" {
				return nil, nil
			}
			return b.TextTree(), b.TokenTree()
		},
		Snapshot: reg.Current,
	}
	return r
}

// route picks a worker for text as the gateway does, and publishes the decision as the
// gateway's cache_aware hook will.
func (r *treeRouter) route(t testing.TB, text string, publish bool) string {
	t.Helper()
	snap := r.reg.Current()
	p := r.builder.Build(policy.Group{Model: "m", Workers: snap.Workers, Snapshot: snap}) // every worker serves m
	res, err := p.Pick(&policy.Request{Text: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	if publish {
		r.node.PublishTree("m", wire.TreeText, []byte(text), res.Worker.URL)
	}
	return res.Worker.URL
}

func longPrompt(i int) string {
	return fmt.Sprintf("%04d system: you are a careful assistant. user: question %d, in full: ", i, i) + strings.Repeat("context ", 30)
}

func addTreeNode(c *memNet, name string, i int, r *treeRouter, seeds ...string) {
	c.trees[addrOf(i)] = r.trees
	r.node = c.add(name, addrOf(i), uint64(i+1), seeds...)
}

func TestTreeDeltasGiveThePeerTheSameDecisions(t *testing.T) {
	net := newMemNet(t)
	a, b := newTreeRouter(t, 0), newTreeRouter(t, 1)
	addTreeNode(net, "a", 0, a)
	addTreeNode(net, "b", 1, b, addrOf(0))
	for range 4 {
		net.round()
	}
	decided := map[string]string{}
	for i := range 40 {
		p := longPrompt(i)
		decided[p] = a.route(t, p, true)
	}
	net.round()
	for p, want := range decided {
		if got := b.route(t, p, false); got != want {
			t.Fatalf("B routes a prompt A sent to %s to %s", want, got)
		}
	}
}

func TestFreshRouterRepairsAndMatchesDecisions(t *testing.T) {
	net := newMemNet(t)
	a, b := newTreeRouter(t, 0), newTreeRouter(t, 1)
	addTreeNode(net, "a", 0, a)
	addTreeNode(net, "b", 1, b, addrOf(0))
	for range 4 {
		net.round()
	}
	decided := map[string]string{}
	for i := range 200 {
		p := longPrompt(i)
		decided[p] = a.route(t, p, true)
	}
	net.round()

	d := newTreeRouter(t, 2)
	addTreeNode(net, "d", 2, d, addrOf(0))
	joined := 0
	for !d.node.Repaired("m", wire.TreeText) {
		joined++
		if joined > 10 {
			t.Fatal("D never repaired")
		}
		net.round()
		if joined >= 2 {
			// Traffic goes on at A; its first delta that D does not know starts the repair.
			p := longPrompt(1000 + joined)
			decided[p] = a.route(t, p, true)
		}
	}
	// The decision A made in the round that completed the repair is still queued at A: one
	// more round delivers it.
	net.round()
	joined++
	for p, want := range decided {
		if got := d.route(t, p, false); got != want {
			t.Fatalf("fresh D routes a prompt A sent to %s to %s", want, got)
		}
	}
	t.Logf("a fresh router makes the cluster's decisions on all %d prompts %d rounds after it starts", len(decided), joined)
}

func TestRepairRetriesAnotherPeerAfterNoProgress(t *testing.T) {
	net := newMemNet(t)
	a, b := newTreeRouter(t, 0), newTreeRouter(t, 1)
	addTreeNode(net, "a", 0, a)
	addTreeNode(net, "b", 1, b, addrOf(0))
	for range 4 {
		net.round()
	}
	for i := range 50 {
		a.route(t, longPrompt(i), true)
	}
	net.round()
	d := newTreeRouter(t, 2)
	addTreeNode(net, "d", 2, d, addrOf(0))
	for range 4 {
		net.round()
	}
	// Every repair page a peer sends D is lost for now.
	noPages := func(m *wire.Sync) bool { return len(m.Pages) == 0 }
	net.mu.Lock()
	for _, s := range net.streams {
		if s.remote == addrOf(2) {
			s.deliverOnly = noPages
		}
	}
	net.mu.Unlock()
	a.route(t, longPrompt(999), true)
	net.round()
	rs := d.node.Repairs()
	if len(rs) != 1 {
		t.Fatalf("no repair started: %+v", rs)
	}
	first := rs[0].Peer
	// Later unknown prefixes fold into the repair in flight.
	a.route(t, longPrompt(998), true)
	net.round()
	if got := len(d.node.Repairs()); got != 1 {
		t.Fatalf("%d repairs in flight, want the one", got)
	}
	net.mu.Lock()
	for _, s := range net.streams {
		s.deliverOnly = nil
	}
	net.mu.Unlock()
	for r := 0; !d.node.Repaired("m", wire.TreeText); r++ {
		if r > 10 {
			t.Fatal("repair never completed")
		}
		net.round()
	}
	if rs := d.node.lastRepair; rs.Retries != 1 || rs.Peer == first {
		t.Fatalf("the repair from %s completed as %+v; want one retry with the other peer", first, rs)
	}
	var sb strings.Builder
	d.node.deps.Metrics.WritePrometheus(&sb)
	if !strings.Contains(sb.String(), "smg_mesh_tree_repairs_folded_total 1") {
		t.Fatalf("fold not counted:\n%s", sb.String())
	}
}

func TestRepairGivesUpAfterThreeRetries(t *testing.T) {
	net := newMemNet(t)
	a := newTreeRouter(t, 0)
	addTreeNode(net, "a", 0, a)
	d := newTreeRouter(t, 2)
	addTreeNode(net, "d", 1, d, addrOf(0))
	for range 4 {
		net.round()
	}
	net.mu.Lock()
	for _, s := range net.streams {
		if s.local == addrOf(0) {
			s.deliverOnly = func(m *wire.Sync) bool { return len(m.Pages) == 0 }
		}
	}
	net.mu.Unlock()
	a.route(t, longPrompt(1), true)
	for range 30 {
		net.round()
	}
	var sb strings.Builder
	d.node.deps.Metrics.WritePrometheus(&sb)
	if !strings.Contains(sb.String(), `smg_mesh_tree_repairs_total{result="failed"} 1`) || d.node.Repaired("m", wire.TreeText) {
		t.Fatalf("repair did not give up once:\n%s", sb.String())
	}
	if len(d.node.Repairs()) != 0 {
		t.Fatal("a given-up repair is still in flight")
	}
}
