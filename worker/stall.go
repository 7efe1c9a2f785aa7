package worker

import (
	"sync/atomic"
	"time"
)

// A worker that stops answering (SIGSTOP, a wedged engine) keeps accepting connections: the
// kernel completes the handshakes and buffers the requests, so health probes with a timeout
// notice only after their interval times their threshold, while load-aware policies see an
// engine with requests in flight and cache_aware keeps sending it the prefix it holds. The
// gateway knows better: it sees every request wait for its first byte. The
// accounting here is what the request path records; worker/stall decides from it.

// Stall states of a worker (StallState).
const (
	// StallNone: the worker answers.
	StallNone uint32 = iota
	// StallSilent: requests wait on the worker and it has given no first byte for longer than
	// the fleet's typical time to first byte allows. It gets no new requests (Routable) and
	// is probed; its waiting requests keep waiting.
	StallSilent
	// StallUnresponsive: silent, and a probe on a fresh connection got no answer either. Its
	// waiting requests are cut (ErrWorkerUnresponsive) and retried elsewhere.
	StallUnresponsive
)

// firstByteState is the request path's record of answers starting on one worker.
type firstByteState struct {
	// waiting counts requests sent to the worker whose answer has not started.
	waiting atomic.Int64
	// quietSince is when the worker last gave a first byte, or when a request started
	// waiting on it while none was (clock.Nanos).
	quietSince atomic.Int64
	// sum and count add up the times to first byte since TakeFirstByteTimes last took them.
	sum, count atomic.Int64
}

// noteSent records a request leaving for the worker at now (clock.Nanos) to wait for its
// first byte. Exactly one noteFirstByte or noteNoFirstByte must follow.
func (w *Worker) noteSent(now int64) {
	if w.firstByte.waiting.Add(1) == 1 {
		w.firstByte.quietSince.Store(now)
	}
}

// noteFirstByte records the first byte of the answer to a request sent at sent, arriving at
// now: the worker answers, so it is no longer stalled.
func (w *Worker) noteFirstByte(sent, now int64) {
	fb := &w.firstByte
	fb.waiting.Add(-1)
	fb.quietSince.Store(now)
	fb.sum.Add(now - sent)
	fb.count.Add(1)
	if w.state.Load()&stallMask != 0 {
		w.setState(stallMask, 0)
	}
}

// noteNoFirstByte records that a request sent to the worker stopped waiting without an
// answer (a transport error, a cut, a client that left).
func (w *Worker) noteNoFirstByte() { w.firstByte.waiting.Add(-1) }

// Silence is how long, at now (clock.Nanos), requests have been waiting on the worker
// without it giving any first byte; 0 when none waits.
func (w *Worker) Silence(now int64) time.Duration {
	if w.firstByte.waiting.Load() <= 0 {
		return 0
	}
	return time.Duration(max(now-w.firstByte.quietSince.Load(), 0))
}

// Waiting is the number of requests waiting for the worker's first byte.
func (w *Worker) Waiting() int64 { return w.firstByte.waiting.Load() }

// TakeFirstByteTimes returns the sum and the number of the times to first byte recorded
// since the last call, and starts counting anew.
func (w *Worker) TakeFirstByteTimes() (sum time.Duration, n int64) {
	return time.Duration(w.firstByte.sum.Swap(0)), w.firstByte.count.Swap(0)
}

// StallState is the worker's stall state: StallNone, StallSilent or StallUnresponsive.
func (w *Worker) StallState() uint32 { return w.state.Load() & stallMask >> stallShift }

// SetStallState sets the stall state (worker/stall's monitor).
func (w *Worker) SetStallState(s uint32) { w.setState(stallMask, s<<stallShift&stallMask) }

// CompareAndSetStallState moves the stall state from old to s, unless the request path
// changed it in between (a first byte clears it).
func (w *Worker) CompareAndSetStallState(old, s uint32) bool {
	for {
		cur := w.state.Load()
		if cur&stallMask>>stallShift != old {
			return false
		}
		if w.state.CompareAndSwap(cur, cur&^stallMask|s<<stallShift&stallMask) {
			w.changed()
			return true
		}
	}
}
