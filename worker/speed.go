package worker

import (
	"math"
	"slices"
	"sync/atomic"
)

// A worker's decode speed, measured by the gateway on the answers it relays: a streamed answer
// arrives a token an engine step, so the gaps between its pieces after the first are the
// engine's steps while it decoded that answer. Their lower quartile (DecodeTimer) is the step
// of a decode without the prefill chunks an engine mixes into some steps (a 2,590-token prompt
// makes one step of 170 ms among steps of 9 ms): free of the prefill that the load report's
// step counts (LoadReport.StepSeconds, running ÷ gen_throughput) and of the arrival rate that
// an estimate counted in picks depended on (docs/benchmarks-history.md). The mean step
// of an answer (its decode time over its tokens) is not: on the simulated shared-prefix and
// mixed-size fleets (policytest, least_load), uniform engines' estimates of it strayed to 2.1
// and 3.4 times the group's median, where a twice slower engine's stands at 1.8-2.2; of the
// median gap, to 1.2 and 4.9 (an engine working through 7,680-word prompts makes more than
// half of a short answer's steps 0.5 s prefill chunks); of the lower quartile, to 1.05 and
// 1.19, the slower engine's at 2.0-2.2. A continuous-batching
// engine's step still grows with its batch, so the estimate moves with the load; policies
// compare it only with the group's other workers (policy/score's SpeedFlags).

// MinDecodeSteps is the fewest decode steps (gaps after the first token) an answer must show to
// count as a sample: the median of a handful of gaps says little.
const MinDecodeSteps = 8

// DecodeGapsKept is how many of an answer's gaps DecodeTimer keeps: the first 32 after its first
// token, enough for a quartile that the steps with a prefill chunk do not move.
const DecodeGapsKept = 32

// DecodeSmoothing is the weight of a new answer's step in DecodeStep's estimate once the worker
// has given 1/DecodeSmoothing of them (before that the estimate is their mean): about the
// last 16 answers.
const DecodeSmoothing = 1.0 / 16

// DecodeTimer times one streamed answer's pieces as the gateway relays them: Piece at each piece
// (the first is its first token), Finish on the worker at its end. Its zero value is ready; it
// allocates nothing. Not safe for concurrent use (one answer, one owner).
type DecodeTimer struct {
	last int64 // when the previous piece arrived, in nanoseconds; 0: none yet
	n    int
	gaps [DecodeGapsKept]int64
}

// Piece records a piece of the answer arriving at now (nanoseconds on a monotonic clock): the
// first starts the timing, each later one adds its gap from the previous (the first
// DecodeGapsKept of them are kept).
func (t *DecodeTimer) Piece(now int64) {
	if t.last != 0 && t.n < DecodeGapsKept {
		t.gaps[t.n] = now - t.last
		t.n++
	}
	t.last = max(now, 1)
}

// Finish notes the lower quartile of the answer's gaps on w (noteDecode) when it had at least
// MinDecodeSteps of them, and resets t.
func (t *DecodeTimer) Finish(w *Worker) {
	if t.last != 0 && t.n >= MinDecodeSteps {
		g := t.gaps[:t.n]
		slices.Sort(g)
		w.noteDecode(g[t.n/4])
	}
	t.last, t.n = 0, 0
}

// decodeState is a worker's decode-step estimate.
type decodeState struct {
	// step is math.Float64bits of the estimate in seconds; 0 before the first sample.
	step atomic.Uint64
	// samples counts the answers the estimate has taken.
	samples atomic.Int64
}

// noteDecode records one answer's decode step of the worker, in nanoseconds (DecodeTimer: the
// lower quartile of the gaps between its pieces); a step ≤ 0 is not a sample. Safe for concurrent use.
func (w *Worker) noteDecode(stepNanos int64) {
	if stepNanos <= 0 {
		return
	}
	sample := float64(stepNanos) / 1e9
	d := &w.decode
	weight := max(1/float64(d.samples.Add(1)), DecodeSmoothing)
	for {
		old := d.step.Load()
		next := sample
		if old != 0 {
			est := math.Float64frombits(old)
			next = est + weight*(sample-est)
		}
		if d.step.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// DecodeStep returns the worker's decode step by estimate in seconds (DecodeTimer) and how many
// answers it was estimated from; 0, 0 before the first.
func (w *Worker) DecodeStep() (seconds float64, samples int64) {
	return math.Float64frombits(w.decode.step.Load()), w.decode.samples.Load()
}

// ClearDecode forgets the worker's decode-step estimate, as if it had relayed no answer yet: a
// simulation that reuses a fleet (policy/policytest) starts each run from nothing.
func (w *Worker) ClearDecode() {
	w.decode.step.Store(0)
	w.decode.samples.Store(0)
}
