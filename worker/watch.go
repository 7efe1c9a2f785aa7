package worker

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Changes is a set of places in a group of workers (a policy's candidates, by their place in
// its slice) whose load state changed since its owner last took them: the writers of a
// watched worker mark its place (Worker.Watch), so that an order kept over the group updates
// only the workers that changed instead of rescanning all of them. Safe for concurrent use:
// marking is lock-free, one bit per place.
type Changes struct{ words []atomic.Uint64 }

// NewChanges returns an empty set over n places.
func NewChanges(n int) *Changes { return &Changes{words: make([]atomic.Uint64, (n+63)/64)} }

// Mark adds place i. A place already marked costs one load: most marks are of a worker that
// changes many times between two takes.
func (c *Changes) Mark(i int) {
	word, bit := &c.words[i/64], uint64(1)<<(i%64)
	if word.Load()&bit == 0 {
		word.Or(bit)
	}
}

// Take appends the marked places to dst in ascending order, empties the set of them and
// returns dst. A change made while Take runs is either taken now or left marked.
func (c *Changes) Take(dst []int32) []int32 {
	for k := range c.words {
		if c.words[k].Load() == 0 {
			continue
		}
		for m := c.words[k].Swap(0); m != 0; m &= m - 1 {
			dst = append(dst, int32(k*64+bits.TrailingZeros64(m)))
		}
	}
	return dst
}

// watcher is one Changes set watching a worker at place pos. It holds the set weakly: a
// policy drops its pickers without telling anyone, and a worker must not keep them alive.
type watcher struct {
	set weak.Pointer[Changes]
	pos int32
}

// Watch makes every change of what a load-aware pick reads of w (its in-flight count, load
// report, dispatch and awaiting counts and state word) mark place pos in c. The watch ends
// when c is garbage-collected; watches of collected sets are dropped by the next Watch.
// Control plane: it copies w's list of watchers.
func (w *Worker) Watch(c *Changes, pos int) {
	entry := watcher{set: weak.Make(c), pos: int32(pos)}
	for {
		old := w.watchers.Load()
		var next []watcher
		if old != nil {
			next = make([]watcher, 0, len(*old)+1)
			for _, x := range *old {
				if x.set.Value() != nil {
					next = append(next, x)
				}
			}
		}
		next = append(next, entry)
		if w.watchers.CompareAndSwap(old, &next) {
			return
		}
	}
}

// changed marks w's place in every set watching it; its writers call it after each change.
func (w *Worker) changed() {
	if w.cold == nil { // a bare Worker of a test
		return
	}
	if ws := w.watchers.Load(); ws != nil {
		for _, x := range *ws {
			if c := x.set.Value(); c != nil {
				c.Mark(int(x.pos))
			}
		}
	}
}

// InFlightCount is a Worker's count of requests in flight: an atomic counter whose changes
// mark the worker's watchers (Watch).
type InFlightCount struct{ n atomic.Int64 }

// Load returns the count.
func (c *InFlightCount) Load() int64 { return c.n.Load() }

// Add adds d and returns the new count.
func (c *InFlightCount) Add(d int64) int64 {
	v := c.n.Add(d)
	c.worker().changed()
	return v
}

// Store sets the count.
func (c *InFlightCount) Store(v int64) {
	c.n.Store(v)
	c.worker().changed()
}

// worker returns the Worker whose InFlight c is: its first field, so they share an address
// (checked by a test). The count lives in the Worker's own cache line, where a scan and the
// request path read it, and has no room for a pointer back.
func (c *InFlightCount) worker() *Worker { return (*Worker)(unsafe.Pointer(c)) }
