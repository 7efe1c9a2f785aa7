package mesh

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/smg-go/smg/mesh/wire"
)

func randomEntries(r *rand.Rand, n int) []wire.Entry {
	out := make([]wire.Entry, n)
	for i := range out {
		out[i] = wire.Entry{
			Key:     fmt.Sprint("k", r.IntN(4)),
			Value:   []byte(fmt.Sprint("v", r.IntN(3))),
			Lamport: uint64(r.IntN(4)),
			Replica: fmt.Sprint("r", r.IntN(3)),
			Deleted: r.IntN(4) == 0,
		}
	}
	return out
}

func state(s *Store) map[string]wire.Entry {
	out := map[string]wire.Entry{}
	s.Range(func(e *wire.Entry) { out[e.Key] = *e })
	return out
}

func mergeAll(s *Store, es []wire.Entry) *Store {
	for _, e := range es {
		s.Merge(e)
	}
	return s
}

// mergeStores folds b's state into a (a replica receiving another's whole state).
func mergeStores(a, b *Store) *Store {
	b.Range(func(e *wire.Entry) { a.Merge(*e) })
	return a
}

// The merge laws make replicas converge whatever the order, grouping and repetition of
// delivery: commutative, associative, idempotent.
func TestStoreMergeLaws(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		a, b, c := randomEntries(r, r.IntN(6)), randomEntries(r, r.IntN(6)), randomEntries(r, r.IntN(6))
		sa := func() *Store { return mergeAll(NewStore(), a) }
		sb := func() *Store { return mergeAll(NewStore(), b) }
		sc := func() *Store { return mergeAll(NewStore(), c) }

		if ab, ba := state(mergeStores(sa(), sb())), state(mergeStores(sb(), sa())); !reflect.DeepEqual(ab, ba) {
			t.Fatalf("iteration %d: not commutative:\n%v\n%v", iter, ab, ba)
		}
		left := state(mergeStores(mergeStores(sa(), sb()), sc()))
		right := state(mergeStores(sa(), mergeStores(sb(), sc())))
		if !reflect.DeepEqual(left, right) {
			t.Fatalf("iteration %d: not associative:\n%v\n%v", iter, left, right)
		}
		once := state(sa())
		if twice := state(mergeStores(sa(), sa())); !reflect.DeepEqual(once, twice) {
			t.Fatalf("iteration %d: not idempotent", iter)
		}
		// Any delivery order of the same entries gives the same state.
		all := append(append(append([]wire.Entry(nil), a...), b...), c...)
		want := state(mergeAll(NewStore(), all))
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		if got := state(mergeAll(NewStore(), all)); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: delivery order changed the result", iter)
		}
	}
}

func TestLastWriterWinsByLamportThenReplica(t *testing.T) {
	s := NewStore()
	s.Merge(wire.Entry{Key: "k", Value: []byte("old"), Lamport: 5, Replica: "z"})
	if s.Merge(wire.Entry{Key: "k", Value: []byte("older"), Lamport: 4, Replica: "zz"}) {
		t.Fatal("a lower Lamport timestamp won")
	}
	if !s.Merge(wire.Entry{Key: "k", Value: []byte("new"), Lamport: 6, Replica: "a"}) {
		t.Fatal("a higher Lamport timestamp lost")
	}
	if !s.Merge(wire.Entry{Key: "k", Value: []byte("tie"), Lamport: 6, Replica: "b"}) {
		t.Fatal("at equal timestamps the higher replica must win")
	}
	if got := string(s.Get("k").Value); got != "tie" {
		t.Fatalf("value %q", got)
	}
}

func TestRestartedOwnerOverridesItsStaleKeys(t *testing.T) {
	c := newCluster(t, 3)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(3)) })
	owner := c.node(2)
	for i := range 5 { // push the key's Lamport timestamp up
		owner.SetLocal("worker:r02:http://w:1", []byte(fmt.Sprint("v", i)))
		owner.SetLocal("worker:r02:http://gone:1", []byte(fmt.Sprint("v", i)))
	}
	c.roundsUntil(t, 3, "keys", func() bool { return c.keyEverywhere(seq(3), "worker:r02:http://gone:1", false) })

	c.net.kill(c.addrs[2])
	c.net.round()
	// Restarted with a fresh clock: it registers one worker again, with a new value, and
	// not the other.
	restarted := c.net.add("r02", c.addrs[2], 7, c.addrs[0])
	restarted.SetLocal("worker:r02:http://w:1", []byte("after-restart"))
	c.roundsUntil(t, 10, "the owner's current state everywhere", func() bool {
		for i := range 3 {
			got := map[string]string{}
			for _, e := range c.node(i).Entries() {
				got[e.Key] = string(e.Value)
			}
			if got["worker:r02:http://w:1"] != "after-restart" {
				return false
			}
			if _, ok := got["worker:r02:http://gone:1"]; ok {
				return false
			}
		}
		return true
	})
}

func TestEntriesAreRelayedAroundACutLink(t *testing.T) {
	c := newCluster(t, 3)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(3)) })
	c.net.partition([]string{c.addrs[0]}, []string{c.addrs[2]})
	c.node(0).SetLocal("worker:r00:http://w:1", []byte("x"))
	c.roundsUntil(t, 5, "relayed through r01", func() bool { return c.keyEverywhere(seq(3), "worker:r00:http://w:1", false) })
}

func TestResentUntilAcknowledged(t *testing.T) {
	c := newCluster(t, 2)
	c.roundsUntil(t, 3, "membership", func() bool { return c.allAlive(seq(2)) })
	c.net.round()
	// Drop everything r00 sends for a few rounds: the entry must arrive once it can.
	var outbound *memStream
	c.net.mu.Lock()
	for _, s := range c.net.streams {
		if !s.closed && s.local == c.addrs[0] {
			outbound = s
		}
	}
	c.net.mu.Unlock()
	if outbound == nil {
		t.Fatal("no stream from r00")
	}
	outbound.full = true
	c.node(0).SetLocal("worker:r00:http://w:1", []byte("x"))
	for range 3 {
		c.net.round()
	}
	if c.keyEverywhere([]int{1}, "worker:r00:http://w:1", false) {
		t.Fatal("delivered through a full stream")
	}
	outbound.full = false
	c.roundsUntil(t, 2, "resent", func() bool { return c.keyEverywhere([]int{1}, "worker:r00:http://w:1", false) })
}
