package mesh

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/smg-go/smg/mesh/wire"
)

// randomOwnedEntries are writes of worker keys of three owners, and those owners' floors.
func randomOwnedEntries(r *rand.Rand, n int) []wire.Entry {
	out := make([]wire.Entry, n)
	for i := range out {
		owner := fmt.Sprint("r", r.IntN(3))
		if r.IntN(5) == 0 {
			out[i] = wire.Entry{Key: floorKey(owner), Lamport: uint64(r.IntN(6)), Replica: owner}
			continue
		}
		out[i] = wire.Entry{
			Key:     workerKey(owner, fmt.Sprint("http://w", r.IntN(3))),
			Value:   []byte(fmt.Sprint("v", r.IntN(2))),
			Lamport: uint64(r.IntN(6)),
			Replica: owner,
			Deleted: r.IntN(3) == 0,
		}
	}
	return out
}

// Floors keep the store a join: any order, grouping and repetition of the same writes and
// floors gives the same state, and no write at or below its owner's floor survives.
func TestStoreMergeLawsWithFloors(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 3000 {
		a, b, c := randomOwnedEntries(r, r.IntN(8)), randomOwnedEntries(r, r.IntN(8)), randomOwnedEntries(r, r.IntN(8))
		sa := func() *Store { return mergeAll(NewStore(), a) }
		sb := func() *Store { return mergeAll(NewStore(), b) }
		sc := func() *Store { return mergeAll(NewStore(), c) }
		if ab, ba := state(mergeStores(sa(), sb())), state(mergeStores(sb(), sa())); !reflect.DeepEqual(ab, ba) {
			t.Fatalf("iteration %d: not commutative:\n%v\n%v", iter, ab, ba)
		}
		if l, rr := state(mergeStores(mergeStores(sa(), sb()), sc())), state(mergeStores(sa(), mergeStores(sb(), sc()))); !reflect.DeepEqual(l, rr) {
			t.Fatalf("iteration %d: not associative:\n%v\n%v", iter, l, rr)
		}
		if once, twice := state(sa()), state(mergeStores(sa(), sa())); !reflect.DeepEqual(once, twice) {
			t.Fatalf("iteration %d: not idempotent", iter)
		}
		all := append(append(append([]wire.Entry(nil), a...), b...), c...)
		s := mergeAll(NewStore(), all)
		want := state(s)
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		if got := state(mergeAll(NewStore(), all)); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: delivery order changed the result", iter)
		}
		for k, e := range want {
			if o := keyOwner(k); o != "" && e.Lamport <= s.Floor(o) {
				t.Fatalf("iteration %d: %v survived floor %d", iter, e, s.Floor(o))
			}
		}
	}
}

const testHorizon = 30 // rounds (seconds of the fake clock)

func newGCCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{net: newMemNet(t)}
	c.net.tune = func(o *Config, _ *Deps) { o.TombstoneHorizon = testHorizon * DefaultRound }
	for i := range n {
		c.names = append(c.names, nodeName(i))
		c.addrs = append(c.addrs, addrOf(i))
		var seeds []string
		if i > 0 {
			seeds = []string{c.addrs[0]}
		}
		c.net.add(c.names[i], c.addrs[i], uint64(i+1), seeds...)
	}
	c.roundsUntil(t, 5, "membership", func() bool { return c.allAlive(seq(n)) })
	return c
}

// storeSizes returns node i's keys, tombstones and floors.
func (c *cluster) storeSizes(i int) (keys, tombstones, floors int) {
	n := c.node(i)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.store.Range(func(e *wire.Entry) {
		if _, ok := floorOwner(e.Key); ok {
			floors++
		}
	})
	return n.store.Len(), n.store.Tombstones(), floors
}

func (c *cluster) live(i int, key string) bool {
	for _, e := range c.node(i).Entries() {
		if e.Key == key {
			return true
		}
	}
	return false
}

func TestChurnedStoreShrinksToLiveEntries(t *testing.T) {
	c := newGCCluster(t, 3)
	owner := c.node(0)
	// Discovery churn: 200 workers come and go over 20 rounds (within the horizon), 10 stay.
	for i := range 10 {
		owner.SetLocal(workerKey("r00", fmt.Sprint("http://static", i)), []byte("s"))
	}
	for i := range 200 {
		k := workerKey("r00", fmt.Sprint("http://pod", i))
		owner.SetLocal(k, []byte("p"))
		if i%10 == 9 {
			c.net.round()
			for j := i - 9; j <= i; j++ {
				owner.DeleteLocal(workerKey("r00", fmt.Sprint("http://pod", j)))
			}
		}
	}
	c.net.round()
	for i := range 3 {
		if _, tomb, _ := c.storeSizes(i); tomb != 200 {
			t.Fatalf("r%02d holds %d tombstones before the horizon, want 200", i, tomb)
		}
	}
	c.roundsUntil(t, 2*testHorizon, "tombstones collected everywhere", func() bool {
		for i := range 3 {
			if keys, tomb, floors := c.storeSizes(i); tomb != 0 || keys != 10+floors || floors != 1 {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		if got := len(c.node(i).Entries()); got != 11 { // 10 workers and r00's floor
			t.Fatalf("r%02d has %d live entries, want 11", i, got)
		}
		if got := c.node(i).met.tombstonesCollected.Get(); got != 200 {
			t.Fatalf("r%02d: smg_mesh_tombstones_collected_total %d, want 200", i, got)
		}
	}
	owner.mu.Lock()
	defer owner.mu.Unlock()
	if len(owner.local) != 11 || len(owner.gc.deletedAt) != 0 {
		t.Fatalf("the owner still remembers its collected keys: %d intents, %d deletion times", len(owner.local), len(owner.gc.deletedAt))
	}
	for name, st := range owner.streams {
		if len(st.acked) > 11 {
			t.Fatalf("the stream to %s still holds %d acknowledgements", name, len(st.acked))
		}
	}
}

// A router partitioned away holds a removed worker's live entry, older than the tombstone;
// the tombstone is collected while it is away; when the partition heals, the stale entry
// must not come back anywhere, and it must leave the returning router too. The owner's other
// worker, re-stamped by the collection, must never disappear from any router meanwhile. The
// returning router either opens the streams (its name sorts first: it sends its stale entry
// before it hears of the floor, which the others refuse) or accepts them (it hears of the
// floor first and drops the entry).
func TestNoResurrectionWhenAPartitionHealsAfterCollection(t *testing.T) {
	for _, stale := range []int{0, 2} {
		t.Run(fmt.Sprint("returning r0", stale), func(t *testing.T) {
			const owner = 1
			others := []int{owner, 2 - stale}
			c := newGCCluster(t, 3)
			gone, stays := workerKey("r01", "http://gone:1"), workerKey("r01", "http://stays:1")
			c.node(owner).SetLocal(stays, []byte("s"))
			c.node(owner).SetLocal(gone, []byte("g"))
			c.roundsUntil(t, 3, "keys everywhere", func() bool {
				return c.keyEverywhere(seq(3), gone, false) && c.keyEverywhere(seq(3), stays, false)
			})
			c.net.afterTick = func() {
				for i := range 3 {
					if !c.live(i, stays) {
						t.Fatalf("r%02d lost a worker its owner never removed", i)
					}
				}
			}

			c.net.partition([]string{c.addrs[stale]}, []string{c.addrs[others[0]], c.addrs[others[1]]})
			c.roundsUntil(t, 30, "DOWN on both sides", func() bool {
				return c.statusEverywhere(others, c.names[stale], wire.StatusDown) && c.view(stale)["r01"].Status == wire.StatusDown
			})
			c.node(owner).DeleteLocal(gone)
			c.roundsUntil(t, 3*testHorizon, "tombstone collected on the owner's side", func() bool {
				for _, i := range others {
					if _, tomb, floors := c.storeSizes(i); tomb != 0 || floors != 1 {
						return false
					}
				}
				return true
			})
			if !c.live(stale, gone) {
				t.Fatal("the partitioned router should still hold the removed worker: it never heard of the removal")
			}

			check := c.net.afterTick
			c.net.afterTick = func() {
				check()
				for _, i := range others {
					if c.live(i, gone) {
						t.Fatalf("r%02d resurrected a removed worker", i)
					}
				}
			}
			c.net.heal()
			c.roundsUntil(t, 30, "healed, the stale entry gone from the returning router too", func() bool {
				return c.allAlive(seq(3)) && !c.live(stale, gone)
			})
			for range 2 * testHorizon {
				c.net.round()
			}
			var refused, dropped uint64
			for i := range 3 {
				if keys, tomb, floors := c.storeSizes(i); tomb != 0 || keys != 1+floors {
					t.Fatalf("r%02d: %d keys, %d tombstones, %d floors after healing", i, keys, tomb, floors)
				}
				if i == stale {
					dropped += c.node(i).met.staleEntries.Get()
				} else {
					refused += c.node(i).met.staleEntries.Get()
				}
			}
			t.Logf("stale entries refused by the owner's side: %d; dropped by the returning router: %d", refused, dropped)
			if refused+dropped == 0 {
				t.Fatal("no router refused or dropped the stale entry: the scenario did not happen")
			}
		})
	}
}

func TestCollectedKeyCanBeAddedAgain(t *testing.T) {
	c := newGCCluster(t, 3)
	k := workerKey("r01", "http://10.1.0.7:8000")
	c.node(1).SetLocal(k, []byte("first"))
	c.roundsUntil(t, 3, "added", func() bool { return c.keyEverywhere(seq(3), k, false) })
	c.node(1).DeleteLocal(k)
	c.roundsUntil(t, 2*testHorizon, "collected", func() bool {
		for i := range 3 {
			if _, tomb, floors := c.storeSizes(i); tomb != 0 || floors != 1 {
				return false
			}
		}
		return true
	})

	// The same URL registered again by the same router.
	c.node(1).SetLocal(k, []byte("second"))
	c.roundsUntil(t, 3, "added again", func() bool { return c.keyEverywhere(seq(3), k, false) })

	// And again after the owner restarted with a fresh clock, below its own floor: its
	// floor comes back from a peer, and it rewrites its keys above it.
	c.node(1).DeleteLocal(k)
	c.roundsUntil(t, 2*testHorizon, "collected again", func() bool {
		_, tomb, _ := c.storeSizes(0)
		return tomb == 0 && !c.live(0, k)
	})
	floor := c.node(0).store.Floor("r01")
	c.net.kill(c.addrs[1])
	c.net.round()
	restarted := c.net.add("r01", c.addrs[1], 77, c.addrs[0])
	restarted.SetLocal(k, []byte("third"))
	if e := restarted.store.Get(k); e.Lamport > floor {
		t.Fatalf("the restarted owner's first write %d is already above its old floor %d: the test does not test", e.Lamport, floor)
	}
	c.roundsUntil(t, 10, "added after the restart", func() bool {
		for i := range 3 {
			got := ""
			for _, e := range c.node(i).Entries() {
				if e.Key == k {
					got = string(e.Value)
				}
			}
			if got != "third" {
				return false
			}
		}
		return true
	})
	if f := restarted.store.Floor("r01"); f != floor {
		t.Fatalf("the restarted owner holds floor %d, want its old %d", f, floor)
	}
}

// An ALIVE peer that has not acknowledged the re-stamped keys and the tombstones on its
// direct stream holds the collection back (it would otherwise drop a re-stamped worker if the
// floor reached it, relayed, before the worker's new write).
func TestCollectionWaitsForEveryLivePeersAcknowledgement(t *testing.T) {
	c := newGCCluster(t, 3)
	k := workerKey("r00", "http://gone:1")
	c.node(0).SetLocal(workerKey("r00", "http://stays:1"), []byte("s"))
	c.node(0).SetLocal(k, []byte("g"))
	c.roundsUntil(t, 3, "added", func() bool { return c.keyEverywhere(seq(3), k, false) })
	var toR02 *memStream
	c.net.mu.Lock()
	for _, s := range c.net.streams {
		if !s.closed && s.local == c.addrs[0] && s.remote == c.addrs[2] {
			toR02 = s
		}
	}
	c.net.mu.Unlock()
	if toR02 == nil {
		t.Fatal("no stream from r00 to r02")
	}
	toR02.full = true
	c.node(0).DeleteLocal(k)
	for range 3 * testHorizon {
		c.net.round()
	}
	if !c.keyEverywhere(seq(3), k, true) {
		t.Fatal("the removal did not reach every router through r01")
	}
	if _, tomb, floors := c.storeSizes(0); tomb != 1 || floors != 0 {
		t.Fatalf("r00 collected while r02 had not acknowledged: %d tombstones, %d floors", tomb, floors)
	}
	toR02.full = false
	c.roundsUntil(t, 5, "collected once acknowledged", func() bool {
		_, tomb, floors := c.storeSizes(0)
		return tomb == 0 && floors == 1
	})
}
