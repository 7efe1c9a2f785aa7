package mesh

import (
	"fmt"
	"testing"

	"github.com/smg-go/smg/mesh/wire"
	"github.com/zeebo/xxh3"
)

type cluster struct {
	net   *memNet
	names []string
	addrs []string
}

func nodeName(i int) string { return fmt.Sprintf("r%02d", i) }

// newCluster starts n nodes; every node but the first bootstraps from the first.
func newCluster(t testing.TB, n int) *cluster { return newTunedCluster(t, n, nil) }

// newTunedCluster is newCluster with tune adjusting each node's options.
func newTunedCluster(t testing.TB, n int, tune func(*Config, *Deps)) *cluster {
	c := &cluster{net: newMemNet(t)}
	c.net.tune = tune
	for i := 0; i < n; i++ {
		c.names = append(c.names, nodeName(i))
		c.addrs = append(c.addrs, addrOf(i))
	}
	for i := 0; i < n; i++ {
		var seeds []string
		if i > 0 {
			seeds = []string{c.addrs[0]}
		}
		c.net.add(c.names[i], c.addrs[i], uint64(i+1), seeds...)
	}
	return c
}

func (c *cluster) node(i int) *Node { return c.net.node(c.addrs[i]) }

// view returns node i's status of every member, itself included.
func (c *cluster) view(i int) map[string]wire.Member {
	out := map[string]wire.Member{}
	for _, m := range c.node(i).Members() {
		out[m.Name] = m
	}
	return out
}

// statusEverywhere reports whether every live node in from sees member name with status s.
func (c *cluster) statusEverywhere(from []int, name string, s wire.Status) bool {
	for _, i := range from {
		if c.view(i)[name].Status != s {
			return false
		}
	}
	return true
}

// allAlive reports whether every node in idx sees every node in idx ALIVE.
func (c *cluster) allAlive(idx []int) bool {
	for _, i := range idx {
		v := c.view(i)
		for _, j := range idx {
			if v[c.names[j]].Status != wire.StatusAlive {
				return false
			}
		}
	}
	return true
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// roundsUntil runs rounds until cond holds and returns how many it took; it fails the test
// after limit rounds.
func (c *cluster) roundsUntil(t testing.TB, limit int, what string, cond func() bool) int {
	t.Helper()
	for r := 1; r <= limit; r++ {
		c.net.round()
		if cond() {
			return r
		}
	}
	t.Fatalf("%s: not reached within %d rounds", what, limit)
	return 0
}

// membershipRoundLimit bounds the rounds until every router sees every other ALIVE: SWIM
// spreads the table in O(log N) rounds once the seed knows everyone (after round 1).
var membershipRoundLimit = map[int]int{3: 3, 10: 5, 50: 8}

func TestMembershipConverges(t *testing.T) {
	for _, n := range []int{3, 10, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCluster(t, n)
			r := c.roundsUntil(t, membershipRoundLimit[n], "everyone ALIVE everywhere", func() bool { return c.allAlive(seq(n)) })
			t.Logf("N=%d: full membership after %d rounds", n, r)
		})
	}
}

func TestWorkerKeyConverges(t *testing.T) {
	for _, n := range []int{3, 10, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCluster(t, n)
			c.roundsUntil(t, membershipRoundLimit[n], "membership", func() bool { return c.allAlive(seq(n)) })
			writer := c.node(n - 1)
			writer.SetLocal("worker:"+writer.Name()+":http://10.9.0.1:8000", []byte(`{"url":"http://10.9.0.1:8000"}`))
			r := c.roundsUntil(t, 3, "key everywhere", func() bool { return c.keyEverywhere(seq(n), "worker:"+writer.Name()+":http://10.9.0.1:8000", false) })
			t.Logf("N=%d: a new worker key reaches every router in %d rounds", n, r)

			writer.DeleteLocal("worker:" + writer.Name() + ":http://10.9.0.1:8000")
			r = c.roundsUntil(t, 6, "tombstone everywhere", func() bool { return c.keyEverywhere(seq(n), "worker:"+writer.Name()+":http://10.9.0.1:8000", true) })
			t.Logf("N=%d: its removal reaches every router in %d rounds", n, r)
		})
	}
}

// keyEverywhere reports whether every node in idx has key live (or, with gone, deleted or
// absent).
func (c *cluster) keyEverywhere(idx []int, key string, gone bool) bool {
	for _, i := range idx {
		found := false
		for _, e := range c.node(i).Entries() {
			if e.Key == key {
				found = true
			}
		}
		if found == gone {
			return false
		}
	}
	return true
}

func TestFailureDetection(t *testing.T) {
	for _, n := range []int{3, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCluster(t, n)
			c.roundsUntil(t, membershipRoundLimit[n], "membership", func() bool { return c.allAlive(seq(n)) })
			victim := n - 1
			c.net.kill(c.addrs[victim])
			others := seq(n - 1)
			suspected := c.roundsUntil(t, 2*n, "first suspicion", func() bool {
				for _, i := range others {
					if c.view(i)[c.names[victim]].Status != wire.StatusAlive {
						return true
					}
				}
				return false
			})
			down := suspected + c.roundsUntil(t, 20, "DOWN everywhere", func() bool {
				return c.statusEverywhere(others, c.names[victim], wire.StatusDown)
			})
			t.Logf("N=%d: first SUSPECTED after %d rounds, DOWN on every router after %d rounds", n, suspected, down)
		})
	}
}

func TestSuspicionThenDown(t *testing.T) {
	c := newCluster(t, 3)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(3)) })
	c.net.kill(c.addrs[2])
	sawSuspected := false
	c.net.afterTick = func() {
		for _, i := range []int{0, 1} {
			if c.view(i)["r02"].Status == wire.StatusSuspected {
				sawSuspected = true
			}
		}
	}
	c.roundsUntil(t, 20, "DOWN on A and B", func() bool {
		return c.statusEverywhere([]int{0, 1}, "r02", wire.StatusDown)
	})
	if !sawSuspected {
		t.Fatal("r02 went DOWN without being SUSPECTED first")
	}
}

func TestFalseSuspicionIsRefuted(t *testing.T) {
	c := newCluster(t, 4)
	c.roundsUntil(t, 4, "membership", func() bool { return c.allAlive(seq(4)) })
	before := c.view(3)["r03"].Incarnation
	// r00 wrongly believes r03 is suspected, and gossips it.
	c.node(0).merge([]wire.Member{{Name: "r03", Addr: c.addrs[3], Status: wire.StatusSuspected, Incarnation: before}})
	c.node(0).mu.Lock()
	c.node(0).pending = true
	c.node(0).mu.Unlock()
	c.roundsUntil(t, 4, "refuted everywhere", func() bool {
		for i := range 4 {
			m := c.view(i)["r03"]
			if m.Status != wire.StatusAlive || m.Incarnation <= before {
				return false
			}
		}
		return true
	})
}

func TestIndirectProbeAvoidsFalseSuspicion(t *testing.T) {
	c := newCluster(t, 5)
	c.roundsUntil(t, 5, "membership", func() bool { return c.allAlive(seq(5)) })
	// r00 cannot ping r04 directly, but the others can: r04 must never be suspected.
	c.net.lossy = func(from, to string) bool { return from == c.addrs[0] && to == c.addrs[4] }
	for range 30 {
		c.net.round()
		for i := range 5 {
			if s := c.view(i)["r04"].Status; s != wire.StatusAlive {
				t.Fatalf("r04 is %v on r%02d although indirect probes reach it", s, i)
			}
		}
	}
}

func TestProbeLossCausesNoDownMark(t *testing.T) {
	c := newCluster(t, 10)
	c.roundsUntil(t, 6, "membership", func() bool { return c.allAlive(seq(10)) })
	var k uint64
	// 30% of direct pings lost, chosen by a hash of a counter: deterministic.
	c.net.lossy = func(from, to string) bool {
		k++
		return xxh3.HashString(fmt.Sprint(k, from, to))%10 < 3
	}
	for range 100 {
		c.net.round()
		for i := range 10 {
			for _, m := range c.node(i).Members() {
				if m.Status == wire.StatusDown {
					t.Fatalf("%s is DOWN on r%02d under 30%% probe loss", m.Name, i)
				}
			}
		}
	}
}

func TestRestartedRouterRejoinsUnderItsName(t *testing.T) {
	c := newCluster(t, 3)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(3)) })
	c.net.kill(c.addrs[2])
	c.roundsUntil(t, 30, "DOWN", func() bool { return c.statusEverywhere([]int{0, 1}, "r02", wire.StatusDown) })
	downInc := c.view(0)["r02"].Incarnation

	// The same name at the same address, with a fresh incarnation 0 and its seed.
	c.net.add("r02", c.addrs[2], 99, c.addrs[0])
	r := c.roundsUntil(t, 5, "rejoined", func() bool { return c.allAlive(seq(3)) })
	if inc := c.view(0)["r02"].Incarnation; inc <= downInc {
		t.Fatalf("rejoined with incarnation %d, not above the DOWN claim's %d", inc, downInc)
	}
	t.Logf("a restarted router is ALIVE everywhere again %d rounds after it starts", r)
}

func TestBootstrapPeerRetriedUntilFirstContact(t *testing.T) {
	m := newMemNet(t)
	late := m.add("b", addrOf(1), 2, addrOf(0))
	for range 5 {
		m.round() // the bootstrap router is not up yet
	}
	m.add("a", addrOf(0), 1)
	for r := 0; ; r++ {
		if r > 70 {
			t.Fatal("b never joined a")
		}
		m.round()
		if len(late.Members()) == 2 && late.Members()[1].Status == wire.StatusAlive {
			break
		}
	}
}

func TestEverySeedIsUsed(t *testing.T) {
	m := newMemNet(t)
	m.add("a", addrOf(0), 1)
	m.add("b", addrOf(1), 2)
	// c knows a dead address first and b second: it must still join through b.
	c := m.add("c", addrOf(2), 3, addrOf(9), addrOf(1))
	for r := 0; len(c.Members()) < 2; r++ {
		if r > 3 {
			t.Fatal("c did not use its second seed")
		}
		m.round()
	}
}

func TestPartitionHeals(t *testing.T) {
	c := newCluster(t, 3)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(3)) })
	c.node(0).SetLocal("worker:r00:http://w0:1", []byte("w0"))
	c.node(1).SetLocal("worker:r01:http://w1:1", []byte("w1"))
	c.roundsUntil(t, 3, "keys", func() bool {
		return c.keyEverywhere(seq(3), "worker:r00:http://w0:1", false) && c.keyEverywhere(seq(3), "worker:r01:http://w1:1", false)
	})

	c.net.partition([]string{c.addrs[0]}, []string{c.addrs[1], c.addrs[2]})
	c.roundsUntil(t, 30, "each side marks the other DOWN", func() bool {
		return c.statusEverywhere([]int{1, 2}, "r00", wire.StatusDown) && c.view(0)["r01"].Status == wire.StatusDown && c.view(0)["r02"].Status == wire.StatusDown
	})
	// Both sides keep their state and keep changing it.
	c.node(0).SetLocal("worker:r00:http://w0b:1", []byte("w0b"))
	c.node(1).DeleteLocal("worker:r01:http://w1:1")
	for range 3 {
		c.net.round()
	}
	if !c.keyEverywhere([]int{1, 2}, "worker:r00:http://w0:1", false) || !c.keyEverywhere([]int{0}, "worker:r01:http://w1:1", false) {
		t.Fatal("a side lost state it had before the partition")
	}

	c.net.heal()
	r := c.roundsUntil(t, 25, "healed and converged", func() bool {
		return c.allAlive(seq(3)) &&
			c.keyEverywhere(seq(3), "worker:r00:http://w0b:1", false) &&
			c.keyEverywhere(seq(3), "worker:r01:http://w1:1", true)
	})
	t.Logf("after healing, membership and state converge in %d rounds", r)
}

func TestLeavingIsNotProbed(t *testing.T) {
	c := newCluster(t, 3)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(3)) })
	c.node(2).Leave(t.Context())
	if !c.statusEverywhere([]int{0, 1}, "r02", wire.StatusLeaving) {
		t.Fatalf("LEAVING not announced: %v %v", c.view(0)["r02"], c.view(1)["r02"])
	}
	c.net.kill(c.addrs[2])
	for range 20 {
		c.net.round()
	}
	if !c.statusEverywhere([]int{0, 1}, "r02", wire.StatusLeaving) {
		t.Fatal("a LEAVING router was probed and marked")
	}
}

func TestAddedSeedIsJoined(t *testing.T) {
	m := newMemNet(t)
	m.add("a", addrOf(0), 1)
	b := m.add("b", addrOf(1), 2) // knows nobody: router discovery tells it about a
	for range 3 {
		m.round()
	}
	if len(b.Members()) != 1 {
		t.Fatalf("b found peers on its own: %v", b.Members())
	}
	b.AddSeed(addrOf(0))
	b.AddSeed(addrOf(0)) // a duplicate is ignored
	for r := 0; ; r++ {
		if r > 5 {
			t.Fatal("b never joined the seed it was given")
		}
		m.round()
		if ms := b.Members(); len(ms) == 2 && ms[1].Status == wire.StatusAlive {
			break
		}
	}
}
