package ring_test

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/ring"
	"github.com/smg-go/smg/worker"
)

const ringKeys = 100_000

func owners(r *ring.Ring, keys int) []*worker.Worker {
	out := make([]*worker.Worker, keys)
	req := &policy.Request{}
	var buf []byte
	for i := range out {
		buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
		out[i] = r.Lookup(req, ring.HashBytes(buf))
	}
	return out
}

// TestRingMovesAboutOneNthOnScale is the spec's promise: adding or removing one of N workers
// moves about 1/N of the keys, and only keys of that worker.
func TestRingMovesAboutOneNthOnScale(t *testing.T) {
	for _, n := range []int{3, 8, 20} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			f := policytest.NewFleet(t, n+1, "m")
			small := ring.New(f.Workers[:n])
			big := ring.New(f.Workers)
			added := f.Workers[n]
			before, after := owners(small, ringKeys), owners(big, ringKeys)
			moved := 0
			for i := range before {
				if before[i] != after[i] {
					moved++
					if after[i] != added {
						t.Fatalf("scale up: key %d moved from %s to %s, not to the new worker", i, before[i].URL, after[i].URL)
					}
				}
			}
			// Scale up to N+1: the new worker takes about 1/(N+1); allow 2 points over 1/N.
			if limit := ringKeys * (1/float64(n) + 0.02); float64(moved) > limit {
				t.Fatalf("scale up moved %d of %d keys, limit %.0f", moved, ringKeys, limit)
			}
			if moved == 0 {
				t.Fatal("scale up moved no key: the new worker owns nothing")
			}
			// Scale down: removing a worker moves exactly its keys, and nothing else.
			removed := f.Workers[0]
			down := owners(ring.New(f.Workers[1:]), ringKeys)
			movedDown := 0
			for i := range after {
				if after[i] != down[i] {
					movedDown++
					if after[i] != removed {
						t.Fatalf("scale down: key %d of %s moved to %s", i, after[i].URL, down[i].URL)
					}
				}
			}
			if limit := ringKeys * (1/float64(n+1) + 0.02); float64(movedDown) > limit {
				t.Fatalf("scale down moved %d of %d keys, limit %.0f", movedDown, ringKeys, limit)
			}
		})
	}
}

func TestRingSpreadsKeysEvenly(t *testing.T) {
	const n = 10
	f := policytest.NewFleet(t, n, "m")
	counts := map[*worker.Worker]int{}
	for _, w := range owners(ring.New(f.Workers), ringKeys) {
		counts[w]++
	}
	for _, w := range f.Workers {
		// 150 virtual nodes keep each share within about ±25% of fair.
		if share := float64(counts[w]) / ringKeys; math.Abs(share-0.1) > 0.025 {
			t.Errorf("%s owns %.3f of the keys, want 0.1 ± 0.025", w.URL, share)
		}
	}
}

func TestRingSkipsUnusableWorkersClockwise(t *testing.T) {
	f := policytest.NewFleet(t, 4, "m")
	r := ring.New(f.Workers)
	all := owners(r, 2000)
	f.SetStatus(f.Workers[1], worker.StatusNotReady)
	down := owners(r, 2000)
	for i := range all {
		if all[i] != f.Workers[1] && down[i] != all[i] {
			t.Fatalf("key %d of a healthy worker moved", i)
		}
		if down[i] == f.Workers[1] {
			t.Fatalf("key %d went to the unavailable worker", i)
		}
	}
	f.SetStatus(f.Workers[1], worker.StatusReady)
	back := owners(r, 2000)
	for i := range all {
		if back[i] != all[i] {
			t.Fatalf("key %d did not return when its worker recovered", i)
		}
	}
	for _, w := range f.Workers {
		f.SetStatus(w, worker.StatusNotReady)
	}
	if w := r.Lookup(&policy.Request{}, 12345); w != nil {
		t.Fatalf("lookup with no usable worker returned %s", w.URL)
	}
	if w := ring.New(nil).Lookup(&policy.Request{}, 1); w != nil {
		t.Fatal("empty ring returned a worker")
	}
}

// TestRingLookupMatchesBinarySearch checks the jump table against a plain search of the points.
func TestRingLookupMatchesBinarySearch(t *testing.T) {
	f := policytest.NewFleet(t, 7, "m")
	r := ring.New(f.Workers)
	ref := ring.RingReference(r)
	req := &policy.Request{}
	for i := range uint64(50_000) {
		h := i * 0x9e3779b97f4a7c15
		if got, want := r.Lookup(req, h), ref(h); got != want {
			t.Fatalf("hash %#x: Lookup %s, reference %s", h, got.URL, want.URL)
		}
	}
	for _, h := range []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1} {
		if got, want := r.Lookup(req, h), ref(h); got != want {
			t.Fatalf("hash %#x: Lookup %s, reference %s", h, got.URL, want.URL)
		}
	}
}

func BenchmarkRingBuild(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n, "m")
			b.ReportAllocs()
			for b.Loop() {
				ring.New(f.Workers)
			}
		})
		b.Run(fmt.Sprintf("workers=%d/one-changed", n), func(b *testing.B) {
			f := policytest.NewFleet(b, n+1, "m")
			rb := ring.NewBuilder()
			sets := [2][]*worker.Worker{f.Workers[:n], f.Workers[1:]}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rb.Build(sets[i%2])
				i++
			}
		})
	}
}

// TestRingBuilderMatchesFreshBuild checks incremental rebuilds against building from scratch.
func TestRingBuilderMatchesFreshBuild(t *testing.T) {
	f := policytest.NewFleet(t, 12, "m")
	w := f.Workers
	rb := ring.NewBuilder()
	for i, set := range [][]*worker.Worker{
		w[:5], w[:5], w[2:9], {w[11], w[0], w[3]}, w, nil, w[4:6],
	} {
		got, want := owners(rb.Build(set), 5000), owners(ring.New(set), 5000)
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("set %d key %d: incremental %v, fresh %v", i, k, got[k], want[k])
			}
		}
	}
}
