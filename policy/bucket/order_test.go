package bucket

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// scanPick is what Pick stands for: the balance check scans every owner from a random place on,
// keeping the first least-loaded usable one and the most load, then the request goes to its
// bucket's owner, or to the least loaded when the loads are imbalanced.
func scanPick(b *Builder, req *policy.Request) (*worker.Worker, error) {
	bs := b.bounds.Load()
	size := int64(len(req.Tokens))
	if size == 0 {
		size = int64(policy.CountChars(req.Text))
	}
	var minLoad, maxLoad int64 = math.MaxInt64, -1
	least := -1
	n := len(bs.owners)
	if n == 0 {
		return nil, policy.ErrNoAvailableWorkers
	}
	start := b.rnd.IntN(n)
	for k := range n {
		i := (start + k) % n
		if !req.Usable(bs.owners[i]) {
			continue
		}
		l := bs.loads[i].sum()
		maxLoad = max(maxLoad, l)
		if l < minLoad {
			minLoad, least = l, i
		}
	}
	if least < 0 {
		return nil, policy.ErrNoAvailableWorkers
	}
	chosen := least
	if !(maxLoad-minLoad > int64(b.cfg.BalanceAbsThreshold) && float64(maxLoad) > b.cfg.BalanceRelThreshold*float64(minLoad)) {
		if i, _ := slices.BinarySearch(bs.upper, size); i < n && req.Usable(bs.owners[i]) {
			chosen = i
		}
	}
	bs.loads[chosen].add(b.cur.Load(), size)
	k := b.sizesNext.Add(1) - 1
	b.sizes[k%recentSizes].Store(uint64(b.epoch.Load())<<32 | uint64(min(size, math.MaxUint32)))
	return bs.owners[chosen], nil
}

// TestOrderPicksAsTheScan: on random sequences of requests (of random sizes, some retries
// excluding workers), status, overload and breaker changes, window rotations and snapshots
// that change the owners, Pick chooses the worker scanPick chooses, drawing the same random
// numbers, and both keep the same boundaries.
func TestOrderPicksAsTheScan(t *testing.T) {
	configs := []Config{DefaultConfig(), noBalance, {BalanceAbsThreshold: 32, BalanceRelThreshold: 1.0001}}
	for ci, cfg := range configs {
		for seed := range uint64(3) {
			f := policytest.NewFleet(t, 9+int(seed)*17, "m")
			rng := rand.New(rand.NewPCG(seed, 11))
			tree, scan := New(cfg, testutil.NewRand(seed)), New(cfg, testutil.NewRand(seed))
			p := tree.Build(f.Group("m"))
			scan.Build(f.Group("m"))
			sec := 0
			tree.Maintain(at(0))
			scan.Maintain(at(0))
			for step := range 4000 {
				switch op := rng.IntN(100); {
				case op < 4:
					w := f.Workers[rng.IntN(len(f.Workers))]
					w.SetOverloaded(!w.Overloaded())
				case op < 6:
					w := f.Workers[rng.IntN(len(f.Workers))]
					if w.Status() == worker.StatusReady {
						f.SetStatus(w, worker.StatusNotReady)
					} else {
						f.SetStatus(w, worker.StatusReady)
					}
				case op < 7:
					w := f.Workers[rng.IntN(len(f.Workers))]
					for range breaker.DefaultFailureThreshold {
						w.Breaker.Record(breaker.Permit{}, breaker.Fault, clock.Nanos())
					}
				case op < 12:
					sec += rng.IntN(3)
					tree.Maintain(at(float64(sec)))
					scan.Maintain(at(float64(sec)))
				case op < 14: // a snapshot, most often with other owners
					ws := f.Workers
					for range rng.IntN(3) {
						i := rng.IntN(len(ws))
						ws = append(ws[:i:i], ws[i+1:]...)
					}
					p = tree.Build(f.Group("m", ws...))
					scan.Build(f.Group("m", ws...))
				}
				req := &policy.Request{Text: []byte(strings.Repeat("a", rng.IntN(6000)))}
				if rng.IntN(4) == 0 {
					req.Text, req.Tokens = nil, make([]uint32, rng.IntN(3000))
				}
				if rng.IntN(5) == 0 {
					for range 1 + rng.IntN(len(f.Workers)) {
						req.Exclude = append(req.Exclude, f.Workers[rng.IntN(len(f.Workers))])
					}
				}
				res, err := p.Pick(req)
				want, wantErr := scanPick(scan, req)
				if res.Worker != want || (err == nil) != (wantErr == nil) {
					t.Fatalf("config %d seed %d step %d: picked %s (%v), the scan %s (%v)", ci, seed, step, urlOf(res.Worker), err, urlOf(want), wantErr)
				}
				if got, want := tree.Bounds(), scan.Bounds(); !slices.Equal(got, want) {
					t.Fatalf("config %d seed %d step %d: bounds %v, the scan's %v", ci, seed, step, got, want)
				}
			}
		}
	}
}

// TestOrderFollowsTheOwners: an order over a group watches each owner once, and a snapshot
// with other owners moves the watch to them.
func TestOrderFollowsTheOwners(t *testing.T) {
	f, b, _ := setup(t, 6, DefaultConfig())
	watched := func(want ...int) {
		t.Helper()
		var got []int
		for i, w := range f.Workers {
			switch w.Watchers() {
			case 0:
			case 1:
				got = append(got, i)
			default:
				t.Fatalf("worker %d is watched %d times", i, w.Watchers())
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("watched workers %v, want %v", got, want)
		}
	}
	watched(0, 1, 2, 3, 4, 5)
	b.Build(f.Group("m", f.Workers[1], f.Workers[2], f.Workers[4]))
	watched(1, 2, 4)
	b.Build(f.Group("m", f.Workers[0], f.Workers[2], f.Workers[4]))
	watched(0, 2, 4)
}

func urlOf(w *worker.Worker) string {
	if w == nil {
		return "none"
	}
	return w.URL
}
