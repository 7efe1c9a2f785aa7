package worker

import (
	"math"
	"time"
)

// LoadReport is one load report of a worker, polled off the hot path (worker/loadmon) from the
// engine's /v1/loads or Prometheus /metrics. Reports are immutable once published on the
// worker with Worker.SetLoad.
type LoadReport struct {
	// The fields the expected-wait score reads come first and the struct is padded to 128
	// bytes (its own size class), so scoring a worker touches one cache line of its report.

	// WaitingTokens is the uncached tokens waiting in the queue (num_waiting_uncached_tokens,
	// summed across DP ranks); -1 when the engine reports no token count.
	WaitingTokens int64
	// WaitingRequests and RunningRequests are summed across DP ranks.
	WaitingRequests int
	// GenThroughput is generation throughput in tokens/s; 0 when not reported.
	GenThroughput float64

	// Derived at publication (SetLoad), so that scoring a worker on the hot path needs no
	// division: 1/GenThroughput (0 when not reported) and k/(1-k) of TokenUsage clamped to
	// [0, MaxKVUsage].
	invThroughput float64
	kvOccupancy   float64

	RunningRequests int
	// TokenUsage is KV-cache usage in [0, 1], the mean across DP ranks.
	TokenUsage float64
	// At is when the gateway received the report.
	At time.Time

	_ [48]byte
}

// MaxKVUsage caps the KV-cache usage the occupancy term k/(1-k) is computed from: a report of a
// full cache then scores very high instead of +Inf, so two full workers still compare by their
// queued work.
const MaxKVUsage = 0.999

// InvThroughput returns 1/GenThroughput, or 0 when the report has no throughput.
func (r *LoadReport) InvThroughput() float64 { return r.invThroughput }

// KVOccupancy returns k/(1-k) for the report's KV-cache usage k clamped to [0, MaxKVUsage]: the
// M/M/1 occupancy term of the expected-wait score, small until the cache is nearly full.
func (r *LoadReport) KVOccupancy() float64 { return r.kvOccupancy }

func (r *LoadReport) derive() {
	r.invThroughput = 0
	if r.GenThroughput > 0 && !math.IsInf(r.GenThroughput, 1) {
		r.invThroughput = 1 / r.GenThroughput
	}
	k := r.TokenUsage
	if !(k > 0) { // also NaN
		k = 0
	} else if k > MaxKVUsage {
		k = MaxKVUsage
	}
	r.kvOccupancy = k / (1 - k)
}

// Load returns the worker's latest load report, or nil when it has none (never reported, or
// the last report aged out).
func (w *Worker) Load() *LoadReport { return w.load.Load() }

// SetLoad publishes a new load report (nil clears it) and resets the since-report counters,
// whose work the new report now includes.
func (w *Worker) SetLoad(r *LoadReport) {
	if r != nil {
		r.derive()
	}
	w.load.Store(r)
	w.sinceReportRequests.Store(0)
	w.sinceReportTokens.Store(0)
	w.sinceReportUnknown.Store(0)
}

// NoteDispatch records a request dispatched to the worker since its last load report, for the
// expected-wait score's in-flight credit: tokens is its token count when known, else -1.
func (w *Worker) NoteDispatch(tokens int) {
	w.sinceReportRequests.Add(1)
	if tokens >= 0 {
		w.sinceReportTokens.Add(int64(tokens))
	} else {
		w.sinceReportUnknown.Add(1)
	}
}

// SinceReport returns the requests dispatched since the last load report, the sum of their
// known token counts, and how many of them had no known token count.
func (w *Worker) SinceReport() (requests, knownTokens, unknown int64) {
	return w.sinceReportRequests.Load(), w.sinceReportTokens.Load(), w.sinceReportUnknown.Load()
}

// Overloaded reports whether overload protection vetoes the worker: its last load report
// showed a queue or a KV cache past the --worker-overload-* limits.
func (w *Worker) Overloaded() bool { return w.overloaded.Load() }

// SetOverloaded sets the overload veto; the load monitor calls it with every report.
func (w *Worker) SetOverloaded(v bool) { w.overloaded.Store(v) }
