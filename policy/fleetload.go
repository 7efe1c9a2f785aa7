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
type FleetMean struct{ c fleetCache }

// RefreshDivisor sets how often FleetMean recomputes: every len(workers)/RefreshDivisor reads.
const RefreshDivisor = 16

// NewFleetMean returns the mean tracker of ws.
func NewFleetMean(ws []*worker.Worker) *FleetMean {
	m := new(FleetMean)
	m.c.init(ws, uint64(max(1, len(ws)/RefreshDivisor)))
	m.c.refresh(meanInFlight, 0)
	return m
}

// Mean returns the (possibly slightly stale) mean in-flight count of the available workers.
func (m *FleetMean) Mean() float64 { return m.c.get(meanInFlight, 0) }

func meanInFlight(ws []*worker.Worker, _ float64) float64 {
	var sum int64
	n := 0
	for _, w := range ws {
		if w.Routable() {
			sum += w.InFlight.Load()
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// FleetRate is the rate, in tokens/s, at which the expected-wait score turns token work into
// seconds: the mean generation throughput reported by a group's available workers that report
// one, or the default throughput when none does. It is one rate for the whole group on
// purpose: an engine's reported gen_throughput measures its current batch, that is its load,
// not its capacity, so dividing each worker's work by its own report makes a busy worker look
// cheap and an idle one (which reports 0) look unknown. docs/differences.md has the
// measurements.
//
// The rate moves only when reports arrive (every --load-monitor-interval) and, being the same
// for every worker, a stale rate changes no ranking between reporting workers; so FleetRate
// recomputes only every RateRefreshFactor × len(workers) reads, a quarter of a worker's load
// read per pick amortised, which keeps power_of_two's pick O(1). Safe for concurrent use.
//
// It also tracks the group's mean decode step (StepSeconds), the reference the expected-wait
// score measures each worker's relative speed against.
type FleetRate struct {
	c, step  fleetCache
	fallback float64
}

// RateRefreshFactor sets how often FleetRate recomputes: every RateRefreshFactor × len(workers)
// reads.
const RateRefreshFactor = 4

// NewFleetRate returns the rate tracker of ws; fallback (tokens/s, > 0) is the rate when no
// worker reports a throughput.
func NewFleetRate(ws []*worker.Worker, fallback float64) *FleetRate {
	r := &FleetRate{fallback: fallback}
	every := uint64(RateRefreshFactor * max(1, len(ws)))
	r.c.init(ws, every)
	r.c.refresh(meanThroughput, fallback)
	r.step.init(ws, every)
	r.step.refresh(meanStep, 0)
	return r
}

// TokensPerSecond returns the (possibly slightly stale) rate.
func (r *FleetRate) TokensPerSecond() float64 { return r.c.get(meanThroughput, r.fallback) }

// StepSeconds returns the (possibly slightly stale) mean decode step of the available workers
// whose reports have shown one (worker.LoadReport.StepSeconds), or 0 when none has.
func (r *FleetRate) StepSeconds() float64 { return r.step.get(meanStep, 0) }

func meanStep(ws []*worker.Worker, _ float64) float64 { return meanReported(ws, 0, stepOf) }

func meanThroughput(ws []*worker.Worker, fallback float64) float64 {
	return meanReported(ws, fallback, throughputOf)
}

// stepOf is a report's decode step, when it has shown one.
func stepOf(l *worker.LoadReport) (float64, bool) { return l.StepSeconds(), l.StepSeconds() > 0 }

// throughputOf is a report's generation throughput, when usable: InvThroughput is 0 exactly
// when the throughput is not (0, negative, NaN or +Inf), so a mean never sees those.
func throughputOf(l *worker.LoadReport) (float64, bool) {
	return l.GenThroughput, l.InvThroughput() > 0
}

// meanReported is the mean of of's values over the available workers of ws whose load report
// has one, or fallback when none has.
func meanReported(ws []*worker.Worker, fallback float64, of func(*worker.LoadReport) (float64, bool)) float64 {
	var sum float64
	n := 0
	for _, w := range ws {
		if !w.Routable() {
			continue
		}
		if l := w.Load(); l != nil {
			if v, ok := of(l); ok {
				sum += v
				n++
			}
		}
	}
	if n == 0 {
		return fallback
	}
	return sum / float64(n)
}

// fleetCache holds a statistic over a group's workers, recomputed on every every-th read.
type fleetCache struct {
	workers []*worker.Worker
	every   uint64
	reads   atomic.Uint64
	bits    atomic.Uint64 // math.Float64bits of the cached value
}

func (c *fleetCache) init(ws []*worker.Worker, every uint64) {
	c.workers, c.every = ws, every
}

// get returns the cached value, recomputing it with compute(workers, arg) when due. compute
// is a plain function, not a closure, so that a read allocates nothing.
func (c *fleetCache) get(compute func([]*worker.Worker, float64) float64, arg float64) float64 {
	if c.reads.Add(1)%c.every == 0 {
		return c.refresh(compute, arg)
	}
	return math.Float64frombits(c.bits.Load())
}

func (c *fleetCache) refresh(compute func([]*worker.Worker, float64) float64, arg float64) float64 {
	v := compute(c.workers, arg)
	c.bits.Store(math.Float64bits(v))
	return v
}

// NoHotLimit disables the in-flight filter of LeastInFlight and score.Scorer.Lowest.
var NoHotLimit = math.Inf(1)

// LeastInFlight returns a usable worker of ws with the fewest in-flight requests, ties broken
// uniformly at random, skipping workers whose count exceeds above (NoHotLimit keeps all);
// nil when none qualifies.
func LeastInFlight(req *Request, ws []*worker.Worker, rnd Rand, above float64) *worker.Worker {
	return LeastBy(req, ws, rnd, above, inFlightOf)
}

func inFlightOf(w *worker.Worker) int64 { return w.InFlight.Load() }

// LeastBy returns a usable worker of ws with the least count, ties broken uniformly at random,
// skipping workers whose count exceeds above (NoHotLimit keeps all); nil when none qualifies.
func LeastBy(req *Request, ws []*worker.Worker, rnd Rand, above float64, count func(*worker.Worker) int64) *worker.Worker {
	var best *worker.Worker
	var least int64
	ties := 0
	for _, w := range ws {
		if !req.Usable(w) {
			continue
		}
		n := count(w)
		if float64(n) > above {
			continue
		}
		switch {
		case best == nil || n < least:
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
