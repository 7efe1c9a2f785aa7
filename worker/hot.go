package worker

import "time"

// A Worker's state word packs its status with the vetoes Routable reads, so that the routable
// test of a scan is one atomic load: the word of a routable worker whose breaker is closed is
// exactly StatusReady. Each part keeps its own writer (the registry the status, the load
// monitor the overload veto, the request path and worker/stall the stall state, the breaker's
// transitions the breaker bit); a writer changes its bits with a compare-and-swap loop.
const (
	statusMask    = 0xff
	stateOverload = 1 << 8
	stallShift    = 9
	stallMask     = 3 << stallShift
	// stateBreaker is set while the breaker may not be closed: it mirrors the breaker's state
	// after each transition (syncBreaker), and Routable asks the breaker itself when it is set.
	stateBreaker = 1 << 11
)

// setState replaces the bits of mask in the state word with bits.
func (w *Worker) setState(mask, bits uint32) {
	for {
		old := w.state.Load()
		next := old&^mask | bits
		if old == next {
			return
		}
		if w.state.CompareAndSwap(old, next) {
			w.changed()
			return
		}
	}
}

// setStatus sets the status (the registry's writer).
func (w *Worker) setStatus(s Status) { w.setState(statusMask, uint32(s)) }

// syncBreaker sets the breaker bit from the breaker's state; the breaker calls it after every
// transition. Transitions racing on other goroutines may run their calls in any order, so it
// stores and checks again until the state it stored is still the breaker's: whichever call
// stores last sees the latest transition, and the bit ends up right.
func (w *Worker) syncBreaker() {
	for {
		closed := w.Breaker.Closed()
		bit := uint32(stateBreaker)
		if closed {
			bit = 0
		}
		w.setState(stateBreaker, bit)
		if w.Breaker.Closed() == closed {
			return
		}
	}
}

// slabChunk is how many Workers the registry allocates at once: 8 of 64 bytes, 512 bytes, the
// largest object the runtime places without an allocation header (which would shift every
// Worker off its cache line), in a size class whose objects are 512-byte aligned. Chunks
// allocated one after another by the registry's goroutine are mostly adjacent.
const slabChunk = 8

// slab hands out zero Workers from contiguous chunks, so that workers registered one after
// another, which a policy's group lists in that order, lie in consecutive cache lines. A slot
// is never reused: a removed Worker may still be held by requests in flight, whose in-flight
// decrement must not reach a new worker. A chunk is freed by the garbage collector once none
// of its Workers is referenced, so a churning fleet keeps at most one 512-byte chunk per live
// worker (in practice far less: workers registered together leave together).
type slab struct{ free []Worker }

// next returns a zero Worker.
func (s *slab) next() *Worker {
	if len(s.free) == 0 {
		s.free = make([]Worker, slabChunk)
	}
	w := &s.free[0]
	s.free = s.free[1:]
	return w
}

// PhaseSlices is how many phases the background pollers (worker/health, worker/loadmon) spread
// a fleet's probes over within one interval, so that a fleet registered at once is not probed
// in one burst every interval, while a round walks the fleet at most PhaseSlices times per
// interval.
const PhaseSlices = 32

// Phase is the worker's slice of a polling interval, in [0, PhaseSlices): its Index modulo
// PhaseSlices. Indexes are dense, so any fleet's workers fill the slices evenly (their counts
// differ by at most one).
func (w *Worker) Phase() int { return int(w.Index % PhaseSlices) }

// PhaseOffset is where the worker's slice starts within an interval: interval × Phase ÷
// PhaseSlices.
func (w *Worker) PhaseOffset(interval time.Duration) time.Duration {
	return interval / PhaseSlices * time.Duration(w.Phase())
}
