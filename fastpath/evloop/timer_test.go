package evloop

import (
	"math/rand/v2"
	"testing"
)

// firedTimer records its expiries.
type firedTimer struct {
	t     timer
	id    int
	fired *[]int
}

func (f *firedTimer) onTimer(uint8) { *f.fired = append(*f.fired, f.id) }

// TestTimerHeapMatchesReferenceModel drives the lazy heap (disarm leaves the entry, a later
// arm keeps the earlier key) with random arms, disarms, removals and clock steps, against a
// model that only records each timer's deadline: every step must fire exactly the timers the
// model says are due, and the heap must stay a heap whose keys never pass a live deadline.
func TestTimerHeapMatchesReferenceModel(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var fired []int
		l := &loop{}
		ts := make([]*firedTimer, 24)
		for i := range ts {
			ts[i] = &firedTimer{t: timer{idx: -1}, id: i, fired: &fired}
			ts[i].t.owner = ts[i]
		}
		model := make([]int64, len(ts)) // deadline of each armed timer, 0 when not armed
		for step := range 400 {
			i := rng.IntN(len(ts))
			switch op := rng.IntN(10); {
			case op < 5:
				at := l.now + 1 + rng.Int64N(100)
				l.timers.arm(&ts[i].t, at, 0)
				model[i] = at
			case op < 7:
				l.timers.disarm(&ts[i].t)
				model[i] = 0
			case op < 8:
				l.timers.remove(&ts[i].t)
				model[i] = 0
				if ts[i].t.idx >= 0 {
					t.Fatalf("seed %d step %d: a removed timer is still in the heap", seed, step)
				}
			default:
				l.now += rng.Int64N(60)
				fired = fired[:0]
				l.timers.fire(l)
				want := map[int]bool{}
				for j, due := range model {
					if due != 0 && due <= l.now {
						want[j] = true
						model[j] = 0
					}
				}
				got := map[int]bool{}
				for _, j := range fired {
					if got[j] {
						t.Fatalf("seed %d step %d: timer %d fired twice", seed, step, j)
					}
					got[j] = true
				}
				if len(got) != len(want) {
					t.Fatalf("seed %d step %d at %d: fired %v, want %v", seed, step, l.now, got, want)
				}
				for j := range want {
					if !got[j] {
						t.Fatalf("seed %d step %d at %d: fired %v, want %v", seed, step, l.now, got, want)
					}
				}
			}
			checkTimerHeap(t, l, ts, model)
		}
	}
}

func checkTimerHeap(t *testing.T, l *loop, ts []*firedTimer, model []int64) {
	t.Helper()
	h := l.timers
	for i, e := range h {
		if e.idx != i {
			t.Fatalf("heap entry %d says it is at %d", i, e.idx)
		}
		if p := (i - 1) / 2; i > 0 && h[p].at > e.at {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	for i, f := range ts {
		if f.t.armed() != (model[i] != 0) {
			t.Fatalf("timer %d armed %v, model %d", i, f.t.armed(), model[i])
		}
		if model[i] != 0 && (f.t.idx < 0 || f.t.at > model[i] || f.t.due != model[i]) {
			t.Fatalf("armed timer %d: in heap %v, key %d, due %d, model %d", i, f.t.idx >= 0, f.t.at, f.t.due, model[i])
		}
	}
	// next settles the root: it is then an armed timer whose key is its deadline, the
	// earliest of all (the loop parks until then and not for a deadline that went).
	n := l.timers.next()
	earliest := int64(0)
	for _, due := range model {
		if due != 0 && (earliest == 0 || due < earliest) {
			earliest = due
		}
	}
	if n != earliest {
		t.Fatalf("next %d, earliest armed deadline %d", n, earliest)
	}
}

// TestLazyTimerHeapDoesNotGrowWithRearms shows the point of the laziness: a connection's
// timer disarmed and armed again later for every request stays one heap entry and is never
// re-keyed until its first key comes due.
func TestLazyTimerHeapDoesNotGrowWithRearms(t *testing.T) {
	var fired []int
	l := &loop{}
	f := &firedTimer{t: timer{idx: -1}, fired: &fired}
	f.t.owner = f
	l.timers.arm(&f.t, 100, 0)
	for i := range int64(1000) {
		l.timers.disarm(&f.t)
		l.timers.arm(&f.t, 100+i, 0)
	}
	if len(l.timers) != 1 || f.t.at != 100 || f.t.due != 1099 {
		t.Fatalf("heap %d entries, key %d, due %d; want 1, 100, 1099", len(l.timers), f.t.at, f.t.due)
	}
	l.now = 100
	l.timers.fire(l)
	if len(fired) != 0 || f.t.at != 1099 {
		t.Fatalf("at the old key: fired %v, key %d; want nothing fired, key 1099", fired, f.t.at)
	}
	l.now = 1099
	l.timers.fire(l)
	if len(fired) != 1 || len(l.timers) != 0 || f.t.armed() {
		t.Fatalf("at the deadline: fired %v, heap %d, armed %v", fired, len(l.timers), f.t.armed())
	}
}
