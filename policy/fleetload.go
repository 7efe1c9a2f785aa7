package policy

import (
	"math"
	"sync/atomic"

	"github.com/smg-go/smg/worker"
)

// FleetMean is the mean in-flight count of a group's available workers, the baseline of the
// prefix_hash load check and the cache_aware spill gate.
//
// Summing every worker on every pick would make those policies O(n) per request. FleetMean
// instead caches the mean and refreshes it after every len(workers)/RefreshDivisor reads,
// so a pick costs RefreshDivisor atomic loads amortised whatever the fleet size, and the mean
// it sees is at most that many picks old: at 4,096 workers, 256 picks, which moves the mean by
// at most 1/16 of a request. Safe for concurrent use; racing refreshes are harmless.
type FleetMean struct {
	workers []*worker.Worker
	every   uint64
	reads   atomic.Uint64
	bits    atomic.Uint64 // math.Float64bits of the cached mean
}

// RefreshDivisor sets how often FleetMean recomputes: every len(workers)/RefreshDivisor reads.
const RefreshDivisor = 16

// NewFleetMean returns the mean tracker of ws.
func NewFleetMean(ws []*worker.Worker) *FleetMean {
	m := &FleetMean{workers: ws, every: uint64(max(1, len(ws)/RefreshDivisor))}
	m.refresh()
	return m
}

// Mean returns the (possibly slightly stale) mean in-flight count of the available workers.
func (m *FleetMean) Mean() float64 {
	if m.reads.Add(1)%m.every == 0 {
		return m.refresh()
	}
	return math.Float64frombits(m.bits.Load())
}

func (m *FleetMean) refresh() float64 {
	var sum int64
	n := 0
	for _, w := range m.workers {
		if w.Routable() {
			sum += w.InFlight.Load()
			n++
		}
	}
	mean := 0.0
	if n > 0 {
		mean = float64(sum) / float64(n)
	}
	m.bits.Store(math.Float64bits(mean))
	return mean
}

// LeastInFlight returns a usable worker of ws with the fewest in-flight requests, ties broken
// uniformly at random, skipping workers whose count exceeds above (NoHotLimit keeps all);
// nil when none qualifies.
func LeastInFlight(req *Request, ws []*worker.Worker, rnd Rand, above float64) *worker.Worker {
	var best *worker.Worker
	least := int64(math.MaxInt64)
	ties := 0
	for _, w := range ws {
		if !req.Usable(w) {
			continue
		}
		n := w.InFlight.Load()
		if float64(n) > above {
			continue
		}
		switch {
		case n < least:
			best, least, ties = w, n, 1
		case n == least:
			// Reservoir sampling of one: the k-th tie replaces the choice with chance 1/k.
			ties++
			if rnd.IntN(ties) == 0 {
				best = w
			}
		}
	}
	return best
}
