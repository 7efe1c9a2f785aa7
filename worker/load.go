package worker

import (
	"math"
	"sync/atomic"
	"time"
)

// LoadReport is one load report of a worker, polled off the hot path (worker/loadmon) from the
// engine's /v1/loads or Prometheus /metrics. Reports are immutable once published on the
// worker with Worker.SetLoad or SetLoadSince.
type LoadReport struct {
	// The fields the expected-wait score reads fill the first 64 bytes and the struct is 128
	// bytes (its own size class), so scoring a worker touches one cache line of its report
	// (WaitingRequests only with a waiting-queue cap, or without a token count).

	// WaitingTokens is the uncached tokens waiting in the queue (num_waiting_uncached_tokens,
	// summed across DP ranks); -1 when the engine reports no token count.
	WaitingTokens int64

	// Derived at publication (derive): TokenUsage clamped to [0, MaxKVUsage], and that usage
	// per request the report counts (0 when it counts none).
	kvUsage      float64
	kvPerRequest float64
	// since is the worker's dispatch counts when the report was asked for (SetLoadSince):
	// what was dispatched after it is the report's since-report credit, and the in-flight
	// change since then moves its KV usage (KVOccupancyAt).
	since DispatchMark
	// stepSeconds is the engine's decode step by estimate (StepSeconds), derived at
	// publication, or carried over from the worker's previous report when this one has none.
	stepSeconds float64

	// WaitingRequests and RunningRequests are summed across DP ranks.
	WaitingRequests int
	// GenThroughput is generation throughput in tokens/s; 0 when not reported.
	GenThroughput float64

	RunningRequests int
	// TokenUsage is KV-cache usage in [0, 1], the mean across DP ranks.
	TokenUsage float64
	// At is when the gateway received the report.
	At time.Time
	// KVCapacityTokens is the KV cache's size in tokens (max_total_num_tokens, summed across
	// DP ranks); 0 when the engine does not report it. cache_aware bounds what it believes a
	// worker still caches by it.
	KVCapacityTokens int64
}

// DispatchMark is a worker's dispatch counts at one moment (Worker.DispatchMark): the requests
// ever dispatched, the sum of their known token counts, how many had no known count, and
// the requests in flight.
type DispatchMark struct {
	requests, tokens, unknown int64
	inFlight                  int64
}

// MaxKVUsage caps the KV-cache usage the occupancy term k/(1-k) is computed from: a report of a
// full cache then scores very high instead of +Inf, so two full workers still compare by their
// queued work.
const MaxKVUsage = 0.999

// InvThroughput returns 1/GenThroughput, or 0 when the report has no usable throughput (0,
// negative, NaN or +Inf).
func (r *LoadReport) InvThroughput() float64 {
	if r.GenThroughput > 0 && !math.IsInf(r.GenThroughput, 1) {
		return 1 / r.GenThroughput
	}
	return 0
}

// StepSeconds returns the engine's step by estimate, in seconds: RunningRequests ÷
// GenThroughput, the time in which every running sequence produces one token, estimated over
// the worker's reports that have both (StepSmoothing says how); a report without them keeps the
// estimate of the worker's previous report (SetLoadSince carries it over), so an engine that
// has gone idle, and reports 0 running and 0 tokens/s, keeps the speed it last showed; 0
// when no report of the worker has shown one (or its report was cleared). Unlike
// GenThroughput, which grows with the batch (a load measure), the step grows only by the
// per-sequence part of a step, so it tells a slow engine from a fast one at any load.
func (r *LoadReport) StepSeconds() float64 { return r.stepSeconds }

// KVOccupancyAt returns k/(1-k) for the KV-cache usage k the worker has now by estimate, when
// this gateway has inFlight requests on it: the report's usage moved, for each request added
// or finished since the report's poll (SetLoadSince's mark), by the report's mean usage per
// request (TokenUsage over its running plus waiting requests), clamped to [0, MaxKVUsage]. A
// report that counts no request, or no usage, gives its own k. The report is up to a poll
// interval old; its KV usage alone kept a worker that had since drained looking full, and
// one that had since taken many requests looking empty, for the whole interval, and the
// expected-wait score herded on it (docs/differences.md).
func (r *LoadReport) KVOccupancyAt(inFlight int64) float64 {
	k := r.kvUsage
	if d := inFlight - r.since.inFlight; d != 0 && r.kvPerRequest > 0 {
		k = min(max(k+float64(d)*r.kvPerRequest, 0), MaxKVUsage)
	}
	return k / (1 - k)
}

// StepSmoothing is the weight of a longer step in StepSeconds' estimate. A report's step
// counts the prefill the engine happened to do in its last second as well as its speed, so it
// moves with the load, and only upwards: a shorter step than the estimate is taken at once
// (the least disturbed reading of the engine's speed), a longer one moves the estimate by
// this share of the difference. Taken as they come (and read as speed both ways), the
// reports' steps made least_load herd on uniform engines serving shared prefixes, one worker
// taking 1.6-1.8 times its share of the picks between two reports (policytest, 8 engines at
// 70%); estimated so, and read only for clearly slower engines (score.SlowStepRatio), at most
// 1.3 times.
const StepSmoothing = 0.2

func (r *LoadReport) derive(prev *LoadReport) {
	r.stepSeconds = 0
	if prev != nil {
		r.stepSeconds = prev.stepSeconds
	}
	if inv := r.InvThroughput(); inv > 0 && r.RunningRequests > 0 {
		if step := float64(r.RunningRequests) * inv; step < r.stepSeconds || r.stepSeconds == 0 {
			r.stepSeconds = step
		} else {
			r.stepSeconds += StepSmoothing * (step - r.stepSeconds)
		}
	}
	k := r.TokenUsage
	if !(k > 0) { // also NaN
		k = 0
	} else if k > MaxKVUsage {
		k = MaxKVUsage
	}
	r.kvUsage = k
	r.kvPerRequest = 0
	if n := r.RunningRequests + r.WaitingRequests; n > 0 {
		r.kvPerRequest = k / float64(n)
	}
}

// Load returns the worker's latest load report, or nil when it has none (never reported, or
// the last report aged out).
func (w *Worker) Load() *LoadReport { return w.load.Load() }

// SetLoad publishes a new load report (nil clears it); the since-report credit restarts at
// the moment of the call. See SetLoadSince.
func (w *Worker) SetLoad(r *LoadReport) { w.SetLoadSince(r, w.DispatchMark()) }

// SetLoadSince publishes a new load report (nil clears it) that was asked for at mark (the
// worker's DispatchMark taken before the poll was sent): the since-report credit is then the
// work dispatched after mark. The load monitor uses it so that work sent while the poll was
// on its way, which the report may not include, keeps its credit (worker/loadmon).
func (w *Worker) SetLoadSince(r *LoadReport, mark DispatchMark) {
	if r != nil {
		r.derive(w.load.Load())
		r.since = mark
	}
	w.load.Store(r)
	w.changed()
}

// DispatchMark returns the worker's cumulative dispatch counts now.
func (w *Worker) DispatchMark() DispatchMark {
	return DispatchMark{w.dispatchedRequests.Load(), w.dispatchedTokens.Load(), w.dispatchedUnknown.Load(), w.InFlight.Load()}
}

// noteDispatch records a request dispatched to the worker, for the expected-wait score's
// credit of the work sent since the last load report: tokens is its token count when known,
// else -1.
func (w *Worker) noteDispatch(tokens int) {
	count(&w.dispatchedRequests, &w.dispatchedTokens, &w.dispatchedUnknown, 1, tokens)
	w.changed()
}

// noteAwaiting records a request sent to the worker that now waits for its first token;
// tokens is its token count when known, else -1. Exactly one noteFirstToken with the same
// tokens must follow, when its first token arrives or it ends without one.
func (w *Worker) noteAwaiting(tokens int) {
	count(&w.awaitingRequests, &w.awaitingTokens, &w.awaitingUnknown, 1, tokens)
	w.changed()
}

// noteFirstToken records that a request noteAwaiting(tokens) recorded stopped waiting for
// its first token: it arrived, or the request ended without one.
func (w *Worker) noteFirstToken(tokens int) {
	count(&w.awaitingRequests, &w.awaitingTokens, &w.awaitingUnknown, -1, tokens)
	w.changed()
}

// count adds n (1 or -1) requests of tokens tokens each (-1: unknown) to a kind of work's
// counts: its requests, and its known tokens or its requests of unknown size. The counts are
// separate fields because the request count lives in cold (Worker).
func count(requests, known, unknown *atomic.Int64, n int64, tokens int) {
	requests.Add(n)
	if tokens >= 0 {
		known.Add(n * int64(tokens))
	} else {
		unknown.Add(n)
	}
}

// Awaiting returns the requests waiting for the worker's first token (Hold.AwaitFirstToken), the sum
// of their known token counts, and how many had no known count.
func (w *Worker) Awaiting() (requests, knownTokens, unknown int64) {
	return w.awaitingRequests.Load(), w.awaitingTokens.Load(), w.awaitingUnknown.Load()
}

// AwaitingTokens is Awaiting without the request count, which lies outside the worker's
// first cache line: the sum of the known token counts of the requests waiting for the
// worker's first token, and how many had no known count.
func (w *Worker) AwaitingTokens() (knownTokens, unknown int64) {
	return w.awaitingTokens.Load(), w.awaitingUnknown.Load()
}

// SinceReport returns the requests dispatched since the worker's current load report r (as
// returned by Load; zeros when r is nil), the sum of their known token counts, and how many of
// them had no known token count.
func (w *Worker) SinceReport(r *LoadReport) (requests, knownTokens, unknown int64) {
	if r == nil {
		return 0, 0, 0
	}
	return w.dispatchedRequests.Load() - r.since.requests, w.dispatchedTokens.Load() - r.since.tokens,
		w.dispatchedUnknown.Load() - r.since.unknown
}

// SinceReportTokens is SinceReport without the request count, which lies outside the
// worker's first cache line: the known token counts and the count of requests without one.
func (w *Worker) SinceReportTokens(r *LoadReport) (knownTokens, unknown int64) {
	if r == nil {
		return 0, 0
	}
	return w.dispatchedTokens.Load() - r.since.tokens, w.dispatchedUnknown.Load() - r.since.unknown
}

// Overloaded reports whether overload protection vetoes the worker: its last load report
// showed a queue or a KV cache past the --worker-overload-* limits.
func (w *Worker) Overloaded() bool { return w.state.Load()&stateOverload != 0 }

// SetOverloaded sets the overload veto; the load monitor calls it with every report.
func (w *Worker) SetOverloaded(v bool) {
	bit := uint32(0)
	if v {
		bit = stateOverload
	}
	w.setState(stateOverload, bit)
}
