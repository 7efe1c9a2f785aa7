package breaker

import "sync/atomic"

// numBuckets is the resolution of the failure window: Window is cut into this many buckets of
// Window/numBuckets each. Time t falls in bucket floor(t / width); a fault in bucket k counts
// while the current bucket is below k+numBuckets. So a fault counts for at most Window and at
// least Window - width (9/10 of Window), and never once it is older than Window.
const numBuckets = 10

// Bucket slot layout: the bucket index in the high 40 bits, its fault count in the low 24.
const (
	countBits = 24
	countMask = 1<<countBits - 1
)

// window counts the faults recorded since the last success, per time bucket, in a ring of
// numBuckets slots. A slot whose index is older than the ring holds stale counts that are
// ignored and overwritten.
type window struct {
	slots [numBuckets]atomic.Uint64
	// dirty is set after a fault is counted and cleared by the success that forgets the
	// faults, so that a success costs one atomic load when there is nothing to forget:
	// successes are the hot path's common case.
	dirty atomic.Bool
}

// add counts one fault in bucket idx and returns the faults counted in the window that ends
// with bucket idx.
func (w *window) add(idx uint64) uint64 {
	slot := &w.slots[idx%numBuckets]
	for {
		v := slot.Load()
		next := idx<<countBits | 1
		if v>>countBits == idx {
			if v&countMask == countMask {
				break // saturated: already far above any threshold
			}
			next = v + 1
		}
		if slot.CompareAndSwap(v, next) {
			break
		}
	}
	// Set dirty after counting: a concurrent forget then either clears this fault too (and
	// leaves dirty set, costing one harmless extra forget) or ran before it.
	w.dirty.Store(true)
	return w.count(idx)
}

// count returns the faults in buckets idx-numBuckets+1 .. idx. A slot ahead of idx, written
// by a concurrent caller whose clock read a little later, counts too.
func (w *window) count(idx uint64) uint64 {
	var n uint64
	for i := range w.slots {
		v := w.slots[i].Load()
		if v>>countBits+numBuckets > idx {
			n += v & countMask
		}
	}
	return n
}

// forget drops every counted fault; a success and every transition to Closed call it.
func (w *window) forget() {
	w.dirty.Store(false)
	for i := range w.slots {
		w.slots[i].Store(0)
	}
}
