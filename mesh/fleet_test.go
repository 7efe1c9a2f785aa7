package mesh

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/mesh/wire"
)

// The fleet-scale scenario: N routers on the in-memory transport and the fake clock (one round
// is Config.Round, 1 s), measured in rounds. TestFleetScenario runs it at a small N and
// asserts the targets; BenchmarkFleet50 runs it at 50 routers for `make bench-scale` and
// reports the figures (docs/mesh.md).

// fleetLoss is the datagram loss of the false-death and lossy failure-detection phases.
const fleetLoss = 0.05

// fleetFigures are one run's figures, in rounds unless named otherwise.
type fleetFigures struct {
	routers int
	// membership: a cold start through one bootstrap peer until every router sees every
	// router ALIVE.
	membership int
	// coldWorkerSync: a worker key written by the router whose name sorts last, right after
	// membership converged, until every router holds it.
	coldWorkerSync int
	// coldTree: a routing decision published at the same time, by the router in the middle
	// of the names, which goes on routing one new prompt a round: the rounds until the first
	// decision is in every other router's tree (0: not within the limit), and how many
	// other routers held it after the first round. Deltas go only to the peers the publisher
	// has a stream with; the others learn it by a repair, which a later unknown delta starts.
	coldTree, coldTreeFirstRound int
	// warmup: from then until every pair of routers has its sync stream.
	warmup int
	// workerSync, workerRemoval: a worker key written (then deleted) by that router on the
	// warm mesh until every router holds it (its tombstone).
	workerSync, workerRemoval int
	// treeSync: one routing decision published on the warm mesh until it is in every
	// router's tree.
	treeSync int
	// idleBytes, idleBytesMax: bytes sent per round per router on the idle warm mesh, the
	// mean and the busiest router's.
	idleBytes, idleBytesMax float64
	// lossRounds at fleetLoss: the DOWN and SUSPECTED marks of live routers, and the bytes
	// per round per router.
	lossRounds                   int
	falseDeaths, falseSuspicions uint64
	lossBytes                    float64
	// dead, deadAtLoss: for each router process killed (its connections reset), without
	// loss and at fleetLoss, the rounds from the kill until every other router has it DOWN;
	// silent, silentAtLoss: the same for a router that vanished (no connection reset).
	dead, deadAtLoss, silent, silentAtLoss []int
}

// fleet is a cluster whose routers each have their own metrics and cache trees.
type fleet struct {
	*cluster
	sets  []*metrics.Set
	trees []*appliedTrees
}

// appliedTrees records the paths applied to a router's trees, by deltas or repair pages.
type appliedTrees struct {
	Trees
	mu    sync.Mutex
	paths map[string]bool
}

func (a *appliedTrees) Apply(model string, kind wire.TreeKind, path []byte, workerURL string) bool {
	a.mu.Lock()
	a.paths[string(path)] = true
	a.mu.Unlock()
	return a.Trees.Apply(model, kind, path, workerURL)
}

func (a *appliedTrees) has(path string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.paths[path]
}

func newFleet(tb testing.TB, n int) *fleet {
	f := &fleet{cluster: &cluster{net: newMemNet(tb)}}
	for i := range n {
		f.names = append(f.names, nodeName(i))
		f.addrs = append(f.addrs, addrOf(i))
		f.sets = append(f.sets, metrics.NewSet())
		f.trees = append(f.trees, &appliedTrees{Trees: newTreeRouter(tb, i%len(workerURLs)).trees, paths: map[string]bool{}})
	}
	for i := range n {
		f.net.trees[f.addrs[i]] = f.trees[i]
		f.net.tune = func(_ *Config, deps *Deps) { deps.Metrics = f.sets[i] }
		var seeds []string
		if i > 0 {
			seeds = []string{f.addrs[0]}
		}
		f.net.add(f.names[i], f.addrs[i], uint64(i+1), seeds...)
	}
	f.net.tune = nil
	return f
}

// bytesPerRound runs rounds rounds and returns the bytes sent per round per router in idx:
// the mean and the busiest router's.
func (f *fleet) bytesPerRound(idx []int, rounds int) (mean, busiest float64) {
	before := make([]int64, len(idx))
	for k, i := range idx {
		before[k] = f.net.bytesSent(f.addrs[i])
	}
	for range rounds {
		f.net.round()
	}
	var total int64
	for k, i := range idx {
		d := f.net.bytesSent(f.addrs[i]) - before[k]
		total += d
		busiest = max(busiest, float64(d)/float64(rounds))
	}
	return float64(total) / float64(len(idx)) / float64(rounds), busiest
}

// atLoss runs rounds rounds at fleetLoss, the loss seeded by seed, and returns the moves to
// DOWN and to SUSPECTED the routers made meanwhile and the bytes sent per round per router.
func (f *fleet) atLoss(rounds int, seed uint64) (downs, suspicions uint64, bytes float64) {
	all := seq(len(f.addrs))
	f.net.setLoss(fleetLoss, seed)
	downBefore, suspectBefore := statusMarks(f.sets, all, wire.StatusDown), statusMarks(f.sets, all, wire.StatusSuspected)
	bytes, _ = f.bytesPerRound(all, rounds)
	return statusMarks(f.sets, all, wire.StatusDown) - downBefore, statusMarks(f.sets, all, wire.StatusSuspected) - suspectBefore, bytes
}

// killAndDetect kills router victim, returns the rounds until every other router has it
// DOWN (failing past limit), and restarts it under its name, bootstrapped from router 0,
// until every router sees every router ALIVE again.
func (f *fleet) killAndDetect(tb testing.TB, victim, limit int, silently bool) int {
	tb.Helper()
	all := seq(len(f.addrs))
	if silently {
		f.net.vanish(f.addrs[victim])
	} else {
		f.net.kill(f.addrs[victim])
	}
	r := f.roundsUntil(tb, limit, fmt.Sprintf("%s DOWN on every live router", f.names[victim]), func() bool {
		return f.statusEverywhere(without(all, victim), f.names[victim], wire.StatusDown)
	})
	f.net.add(f.names[victim], f.addrs[victim], uint64(1000+victim), f.addrs[0])
	f.roundsUntil(tb, 3*len(all), fmt.Sprintf("%s rejoined", f.names[victim]), func() bool { return f.allAlive(all) })
	return r
}

// coldSync measures, on the mesh whose membership just converged, the rounds until the
// worker key is on every router (failing past limit) and the cold tree figures
// (fleetFigures.coldTree): publisher routes a prompt now and a new one every round after.
func (f *fleet) coldSync(tb testing.TB, limit int, key string, publisher int) (workerRounds, treeRounds, firstRoundHolders int) {
	tb.Helper()
	all := seq(len(f.addrs))
	others := without(all, publisher)
	first := "cold prompt: " + strings.Repeat("context ", 40)
	holders := func() int {
		k := 0
		for _, i := range others {
			if f.trees[i].has(first) {
				k++
			}
		}
		return k
	}
	// A routing decision: the publisher's own tree holds it (as cache_aware's pick inserts
	// it), and the mesh tells the peers.
	route := func(prompt string) {
		f.trees[publisher].Apply("m", wire.TreeText, []byte(prompt), workerURLs[0])
		f.node(publisher).PublishTree("m", wire.TreeText, []byte(prompt), workerURLs[0])
	}
	route(first)
	for r := 1; r <= 4*len(all) && (workerRounds == 0 || treeRounds == 0); r++ {
		f.net.round()
		h := holders()
		if r == 1 {
			firstRoundHolders = h
		}
		if workerRounds == 0 && f.keyEverywhere(all, key, false) {
			workerRounds = r
		}
		if treeRounds == 0 && h == len(others) {
			treeRounds = r
		}
		route(fmt.Sprintf("cold traffic %d: %s", r, first))
	}
	if workerRounds == 0 || workerRounds > limit {
		tb.Fatalf("cold worker key everywhere: not reached within %d rounds", limit)
	}
	return workerRounds, treeRounds, firstRoundHolders
}

// without returns idx without the elements of drop.
func without(idx []int, drop ...int) []int {
	var out []int
	for _, i := range idx {
		if !slices.Contains(drop, i) {
			out = append(out, i)
		}
	}
	return out
}

// runFleet runs the scenario on n routers: cold start, worker sync cold and warm, tree sync,
// idle bytes, lossRounds rounds at fleetLoss, then kills routers one at a time, kills of them
// without loss and kills at fleetLoss. Every wait fails the test past a generous limit.
func runFleet(tb testing.TB, n, lossRounds, kills int) fleetFigures {
	tb.Helper()
	f := newFleet(tb, n)
	fig := fleetFigures{routers: n, lossRounds: lossRounds}
	all := seq(n)
	limit := 3 * n
	suspectRounds := int(DefaultSuspectTimeout / DefaultRound)

	fig.membership = f.roundsUntil(tb, limit, "membership", func() bool { return f.allAlive(all) })
	writer := f.node(n - 1)
	key := "worker:" + writer.Name() + ":http://10.9.0.1:8000"
	writer.SetLocal(key, []byte(`{"url":"http://10.9.0.1:8000"}`))
	fig.coldWorkerSync, fig.coldTree, fig.coldTreeFirstRound = f.coldSync(tb, limit, key, n/2)
	fig.warmup = f.roundsUntil(tb, 4*n, "a sync stream for every pair", func() bool { return streamsComplete(f.cluster, all) })

	key = "worker:" + writer.Name() + ":http://10.9.0.2:8000"
	writer.SetLocal(key, []byte(`{"url":"http://10.9.0.2:8000"}`))
	fig.workerSync = f.roundsUntil(tb, limit, "warm worker key everywhere", func() bool { return f.keyEverywhere(all, key, false) })
	writer.DeleteLocal(key)
	fig.workerRemoval = f.roundsUntil(tb, limit, "tombstone everywhere", func() bool { return f.keyEverywhere(all, key, true) })

	path := "fleet prompt: " + strings.Repeat("context ", 40)
	f.node(n/2).PublishTree("m", wire.TreeText, []byte(path), workerURLs[0])
	fig.treeSync = f.roundsUntil(tb, limit, "routing decision in every tree", func() bool {
		for _, i := range without(all, n/2) {
			if !f.trees[i].has(path) {
				return false
			}
		}
		return true
	})
	fig.idleBytes, fig.idleBytesMax = f.bytesPerRound(all, 60)

	fig.falseDeaths, fig.falseSuspicions, fig.lossBytes = f.atLoss(lossRounds, uint64(n))

	for _, phase := range []struct {
		loss     float64
		silently bool
		rounds   *[]int
	}{
		{0, false, &fig.dead}, {0, true, &fig.silent},
		{fleetLoss, false, &fig.deadAtLoss}, {fleetLoss, true, &fig.silentAtLoss},
	} {
		f.net.setLoss(phase.loss, uint64(n)+1)
		for k := range kills {
			victim := 1 + k*(n-1)/kills // spread over the names, never the bootstrap router
			*phase.rounds = append(*phase.rounds, f.killAndDetect(tb, victim, 4*suspectRounds, phase.silently))
		}
	}
	return fig
}

func (fig fleetFigures) String() string {
	return fmt.Sprintf("N=%d: membership %d rounds; worker key cold %d, warm %d (removal %d); cold tree delta in %d of %d other trees after 1 round, in all after %d (routing a prompt a round); "+
		"warm-up to a stream per pair %d; tree delta %d; "+
		"idle %.0f B/round/router (busiest %.0f); %d rounds at %.0f%% loss: %d false deaths, %d false suspicions, %.0f B/round/router; "+
		"killed router DOWN everywhere after %s rounds, at loss %s; vanished router %s, at loss %s",
		fig.routers, fig.membership, fig.coldWorkerSync, fig.workerSync, fig.workerRemoval, fig.coldTreeFirstRound, fig.routers-1, fig.coldTree,
		fig.warmup, fig.treeSync,
		fig.idleBytes, fig.idleBytesMax, fig.lossRounds, 100*fleetLoss, fig.falseDeaths, fig.falseSuspicions, fig.lossBytes,
		histogram(fig.dead), histogram(fig.deadAtLoss), histogram(fig.silent), histogram(fig.silentAtLoss))
}

// histogram formats rounds as "1×17 2×3": how many times each value occurred.
func histogram(rounds []int) string {
	count := map[int]int{}
	for _, r := range rounds {
		count[r]++
	}
	var b strings.Builder
	for r := range slices.Max(rounds) + 1 {
		if count[r] > 0 {
			fmt.Fprintf(&b, " %d×%d", r, count[r])
		}
	}
	return strings.TrimSpace(b.String())
}

// checkTargets reports the fleet targets fig misses: a killed router DOWN everywhere within
// the suspicion timeout, no false death at loss, worker sync within 3 rounds. A vanished
// router is found by the probe round-robin alone, whose first probe of it is geometric (no
// router probes it in a round with probability about 1/e): its figures are reported, not held
// to the target.
func (fig fleetFigures) checkTargets(tb testing.TB) {
	tb.Helper()
	suspectRounds := int(DefaultSuspectTimeout / DefaultRound)
	for _, r := range append(append([]int(nil), fig.dead...), fig.deadAtLoss...) {
		if r > suspectRounds {
			tb.Errorf("a killed router took %d rounds to be DOWN everywhere, over the %v suspicion timeout", r, DefaultSuspectTimeout)
		}
	}
	if fig.falseDeaths != 0 {
		tb.Errorf("%d live routers marked DOWN in %d rounds at %.0f%% loss", fig.falseDeaths, fig.lossRounds, 100*fleetLoss)
	}
	if fig.coldWorkerSync > 3 || fig.workerSync > 3 {
		tb.Errorf("worker key reached every router in %d rounds cold, %d warm: want at most 3", fig.coldWorkerSync, fig.workerSync)
	}
}

// TestFleetScenario runs the fleet scenario at 10 routers (2 minutes at 5% loss) and holds it
// to the fleet targets; the rounds are a deterministic function of the seeds.
func TestFleetScenario(t *testing.T) {
	fig := runFleet(t, 10, 120, 5)
	t.Log(fig)
	fig.checkTargets(t)
}

// BenchmarkFleet50 is `make bench-scale`'s mesh figure: 50 routers, 10 minutes at 5% loss,
// 20 kills (each router restarted after) without loss and 20 at loss. One iteration is the whole scenario (-benchtime=1x).
func BenchmarkFleet50(b *testing.B) {
	for range b.N {
		fig := runFleet(b, 50, 600, 20)
		b.Log(fig)
		fig.checkTargets(b)
		b.ReportMetric(float64(fig.coldWorkerSync), "cold-worker-sync-rounds")
		b.ReportMetric(float64(fig.workerSync), "worker-sync-rounds")
		b.ReportMetric(float64(fig.treeSync), "tree-sync-rounds")
		b.ReportMetric(float64(fig.coldTree), "cold-tree-sync-rounds")
		b.ReportMetric(float64(slices.Max(fig.dead)), "kill-to-down-rounds")
		b.ReportMetric(float64(slices.Max(fig.deadAtLoss)), "kill-to-down-at-loss-rounds")
		b.ReportMetric(float64(slices.Max(fig.silent)), "vanish-to-down-rounds")
		b.ReportMetric(float64(fig.falseDeaths), "false-deaths")
		b.ReportMetric(fig.idleBytes, "idle-B/round/router")
		b.ReportMetric(fig.lossBytes, "loss-B/round/router")
	}
}

// BenchmarkFleet50FalseDeaths runs the false-death phase of BenchmarkFleet50 with 5 more loss
// seeds: 50 routers, warm, 10 minutes at 5% loss each, and fails on any live router marked
// DOWN.
func BenchmarkFleet50FalseDeaths(b *testing.B) {
	for range b.N {
		for seed := uint64(101); seed <= 105; seed++ {
			f := newFleet(b, 50)
			all := seq(50)
			f.roundsUntil(b, 150, "membership", func() bool { return f.allAlive(all) })
			f.roundsUntil(b, 200, "a sync stream for every pair", func() bool { return streamsComplete(f.cluster, all) })
			deaths, suspicions, _ := f.atLoss(600, seed)
			b.Logf("loss seed %d: %d false deaths, %d suspicion marks in 600 rounds at %.0f%% loss", seed, deaths, suspicions, 100*fleetLoss)
			if deaths != 0 {
				b.Errorf("loss seed %d: %d live routers marked DOWN", seed, deaths)
			}
		}
	}
}
