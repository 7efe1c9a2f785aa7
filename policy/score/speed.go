package score

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Thresholds of SpeedFlags' verdicts, on a worker's decode step (worker.Worker.DecodeStep) over
// the group's lower median. Uniform engines' estimates stay within 1.19 times it on the
// simulated shared-prefix, mixed-size and multi-turn fleets, an engine decoding twice as slowly
// stands at 2.0-2.2 (worker/speed.go): flagging at 1.5 leaves room on both sides, and clearing
// only under 1.2 keeps a worker near the line from flipping with every refresh.
const (
	SlowDecodeFlag  = 1.5
	SlowDecodeClear = 1.2
)

// MinDecodeSamples is how many answers a worker's decode-step estimate must have taken before
// SpeedFlags reads it: a worker with fewer is neither slow nor part of the median.
const MinDecodeSamples = 16

// SlowPenaltyRequests is how many requests like the new one a slow worker ranks as having
// awaiting its first token, in addition to its own (Scorer.LowestInTurnAt): it takes work
// only when every other worker has that many more queued. Each request a slower engine takes
// has a TTFT in the fleet's tail whatever its queue (its own steps are twice as long), so at
// 70% load it should take none; at saturation the others' queues grow past K and it takes
// work again.
const SlowPenaltyRequests = 3

// SpeedFlags says which workers of a group decode clearly more slowly than the others: those
// whose decode step (worker.Worker.DecodeStep, measured on the answers the gateway relays) is
// over SlowDecodeFlag times the group's lower median, until it falls under SlowDecodeClear
// times it. The verdicts are refreshed every max(16, n) picks (Observe) from the workers'
// estimates, which live on the workers and so outlast the picker: a snapshot rebuilt keeps the
// measurements, and a new picker's first refresh restores the verdicts (not the hysteresis of
// a worker between the two thresholds). Safe for concurrent use; Observe allocates nothing.
type SpeedFlags struct {
	slow  []atomic.Bool
	count atomic.Int64 // how many are slow
	// gen counts the refreshes that changed a verdict (Generation).
	gen   atomic.Uint64
	picks atomic.Uint64
	every uint64
	mu    sync.Mutex // held by the refresh
	buf   []float64  // the refresh's estimates, len(slow) at most
}

// NewSpeedFlags returns the flags of a group of n workers, none slow.
func NewSpeedFlags(n int) *SpeedFlags {
	return &SpeedFlags{slow: make([]atomic.Bool, n), every: uint64(max(16, n)), buf: make([]float64, 0, n)}
}

// Observe counts a pick over ws (the group, in the order the flags were made for) and, every
// max(16, n) picks, refreshes the verdicts; a refresh already under way on another goroutine
// is not waited for. A nil f (no speeds) does nothing.
func (f *SpeedFlags) Observe(ws []*worker.Worker) {
	if f == nil || f.picks.Add(1)%f.every != 1 || !f.mu.TryLock() {
		return
	}
	defer f.mu.Unlock()
	f.refresh(ws)
}

// refresh sets the verdicts from ws's estimates; f.mu held.
func (f *SpeedFlags) refresh(ws []*worker.Worker) {
	f.buf = f.buf[:0]
	for _, w := range ws {
		if step, n := w.DecodeStep(); n >= MinDecodeSamples {
			f.buf = append(f.buf, step)
		}
	}
	if len(f.buf) < 3 { // no group to compare with
		changed := false
		for i := range f.slow {
			changed = f.slow[i].Swap(false) || changed
		}
		f.count.Store(0)
		if changed {
			f.gen.Add(1)
		}
		return
	}
	slices.Sort(f.buf)
	// The lower median: with as many slow workers as fast ones, the reference is a fast one.
	ref := f.buf[(len(f.buf)-1)/2]
	count := int64(0)
	changed := false
	for i, w := range ws {
		step, n := w.DecodeStep()
		was := f.slow[i].Load()
		slow := was
		switch {
		case n < MinDecodeSamples:
			slow = false
		case step > SlowDecodeFlag*ref:
			slow = true
		case step < SlowDecodeClear*ref:
			slow = false
		}
		if slow != was {
			f.slow[i].Store(slow)
			changed = true
		}
		if slow {
			count++
		}
	}
	f.count.Store(count)
	if changed {
		f.gen.Add(1)
	}
}

// Generation counts the refreshes that changed some verdict: a holder of the verdicts (a
// Ranking) reads them again when it moves. 0 for a nil f.
func (f *SpeedFlags) Generation() uint64 {
	if f == nil {
		return 0
	}
	return f.gen.Load()
}

// Count returns how many workers are slow; 0 for a nil f.
func (f *SpeedFlags) Count() int {
	if f == nil {
		return 0
	}
	return int(f.count.Load())
}

// SlowPenalty is the awaiting work a slow worker ranks as having besides its own, in tokens:
// SlowPenaltyRequests requests like req (HalfRequest's size twice).
func (s *Scorer) SlowPenalty(req *policy.Request) float64 {
	return SlowPenaltyRequests * 2 * s.HalfRequest(req)
}

// Slow reports whether the worker at place i decodes clearly more slowly than the group; false
// for a nil f.
func (f *SpeedFlags) Slow(i int) bool { return f != nil && f.slow[i].Load() }
