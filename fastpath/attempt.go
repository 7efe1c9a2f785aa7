package fastpath

import (
	"time"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/telemetry"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// attempt is the part of a generation request that does not depend on how its bytes travel:
// its admission slot, its deadline, the workers it picked and what it holds on each, and its
// retry budget. The regular, PD and EPD paths on the loops (evplane.go, evpd.go,
// epd_loop.go) drive it the same way, so that pick, admission, in-flight accounting, breaker
// permits and retries follow one set of rules:
//
//	a.beginOrPark(s, req, w, unpark, now) // admission (or a park in its queue); the deadline starts
//	a.pick(rt, &a.main)                   // breaker-admitted; a refusal costs no attempt
//	a.dispatch(&a.main)                   // the worker's hold, as the request leaves
//	... send the request, read the answer (the loop's I/O) ...
//	a.main.settle(status, err)
//	if a.retryable(status, err) {
//		pause, ok := a.retry(w, now)      // budget and deadline; then a loop timer, a.pick again
//	}
//	a.end()                               // abandons what is still held, frees the slot
//
// In PD mode the prefill worker is a second leg (a.prefill) picked and dispatched the same
// way, and in EPD mode the encode worker a third (a.encode). An attempt is owned by one
// request at a time (it lives in the loop exchange); a leg moved out of it (take) belongs to
// its new owner.
type attempt struct {
	s   *Server
	req *policy.Request
	// deadline bounds the whole request (--request-timeout-secs from admission on): every
	// upstream round trip (tryDeadline), the answer's stream, every backoff pause.
	deadline time.Time
	// failures counts the attempts that failed and were given up (retry).
	failures int
	// admitted is set while the request holds its admission slot.
	admitted bool
	// once is set for a request whose body is streamed to the worker (streamed.go): it can
	// be sent only once, so nothing is retried.
	once bool
	// main is the leg whose answer is the client's (the decode worker in PD mode); prefill
	// is the PD prefill leg, encode the EPD encode leg.
	main, prefill, encode leg
	// first is the first worker picked for main (policy.Recorder learns when a retry served
	// the request elsewhere).
	first *worker.Worker
	// keys and key count the request against its routing key while main is in flight.
	keys *policy.KeyLoads
	key  uint64
	// decode times main's relayed stream, a token a piece, for its worker's decode-step
	// estimate (worker.DecodeTimer).
	decode worker.DecodeTimer
	// For the request's telemetry record: when the first worker was picked (the server
	// clock's Nanos), how many times main was sent, and to which worker last; the first
	// tries one by one, and whether the last failure used the last retry.
	picked     int64
	tries      uint8
	lastWorker *worker.Worker
	tryLog     [telemetry.MaxTries]telemetry.Try
	exhausted  bool
	// cacheMatched and cacheInput are the first pick's prefix match (policy.Result).
	cacheMatched, cacheInput int
}

// start readies the attempt of a request admitted at now (the loop's clock): its deadline
// and its routing key.
func (a *attempt) start(s *Server, req *policy.Request, now time.Time) {
	*a = attempt{s: s, req: req, admitted: true, deadline: now.Add(s.cfg.RequestTimeout)}
	if s.cfg.KeyLoads != nil {
		if h, ok := policy.StickyKeyHash(req, s.cfg.RoutingKeyOverride); ok {
			a.keys, a.key = s.cfg.KeyLoads, h
		}
	}
}

// beginOrPark admits the request at now and starts its deadline (then the caller must call
// end exactly once), refuses it (the error to answer), or parks it as w
// (admission.admitOrPark): the caller parks the exchange on its loop and, once woken, calls
// resume, or cancelPark if the request is given up first.
func (a *attempt) beginOrPark(s *Server, req *policy.Request, w *parkedWaiter, unpark evloop.Unparker, now time.Time) (apiError, int) {
	e, st := s.adm.admitOrPark(w, unpark)
	if st == admitted {
		a.start(s, req, now)
	}
	return e, st
}

// resume ends a parked wait at now: true when the request got its slot (then the caller
// must call end exactly once), false when it has none (the queue timeout passed).
func (a *attempt) resume(s *Server, req *policy.Request, w *parkedWaiter, now time.Time) bool {
	if !s.adm.leave(w) {
		return false
	}
	a.start(s, req, now)
	return true
}

// cancelPark ends the parked wait of a request given up while it waited (its client left):
// a slot that release handed it meanwhile goes back. The attempt never started: nothing else
// is held.
func (a *attempt) cancelPark(s *Server, w *parkedWaiter) {
	if s.adm.leave(w) {
		s.adm.release()
	}
}

// end closes the request: what a leg still holds is abandoned (the request ended without an
// answer that says anything about the worker: a panic, a failed body rewrite, a client that
// left), and the admission slot is freed.
func (a *attempt) end() {
	a.main.abandon()
	a.prefill.abandon()
	a.encode.abandon()
	if a.admitted {
		a.s.adm.release()
	}
	*a = attempt{}
}

// pick picks a worker on rt into l, one that its breaker admits (a half-open breaker admits
// only a few probes). A refusal costs no attempt: the picker is asked again without that
// worker.
func (a *attempt) pick(rt *policy.Route, l *leg) error {
	for refused := 0; ; refused++ {
		res, err := rt.Picker.Pick(a.req)
		if err == nil && refused > len(rt.Candidates) { // a picker that ignores Exclude
			err = policy.ErrNoAvailableWorkers
		}
		if err != nil {
			return err
		}
		w := res.Worker
		now := a.s.clock.Nanos()
		if permit, ok := w.Breaker.TryAcquire(now); ok {
			*l = leg{w: w, permit: permit, clock: a.s.clock}
			if a.picked == 0 {
				a.picked = now
			}
			rt.Selections.Inc()
			a.s.logDecision(rt, w, a.req)
			if l == &a.main && a.first == nil {
				a.first = w
				a.cacheMatched, a.cacheInput = res.CacheMatched, res.CacheInput
			}
			return nil
		}
		a.req.Exclude = append(a.req.Exclude, w)
	}
}

// dispatch takes l's hold on its worker as its request leaves, stamped now on the server's
// clock (after the pick's stamp): the worker's bookkeeping (worker.Hold) and, for the
// answering leg, a unit of the routing key's count (one per request).
func (a *attempt) dispatch(l *leg) {
	now := a.s.clock.Nanos()
	l.hold.Begin(l.w, policy.DispatchTokens(a.req), now)
	if l == &a.main {
		if int(a.tries) < len(a.tryLog) {
			a.tryLog[a.tries] = telemetry.Try{Worker: l.w, Sent: now}
		}
		a.tries++
		a.lastWorker = l.w
	}
	if l == &a.main && a.keys != nil {
		l.keys, l.key = a.keys, a.key
		l.keys.Add(l.key, 1)
	}
}

// streamPiece records a piece of main's relayed stream arriving at now (clock nanoseconds):
// the first is its first token. A data plane asks for a streamed answer's first token
// (worker.Hold.AwaitFirstToken) when it dispatches main; a buffered answer's first token
// comes with its last, so it is not awaited.
func (a *attempt) streamPiece(now int64) {
	a.main.hold.FirstToken()
	a.decode.Piece(now)
}

// streamDone records that main's relayed stream ended whole: the gaps between its pieces are
// its worker's decode steps (worker.DecodeTimer).
func (a *attempt) streamDone() { a.decode.Finish(a.main.w) }

// last reports whether the attempt under way is the request's last by count: a retryable
// answer is then delivered as it is.
func (a *attempt) last() bool { return a.once || a.failures+1 >= a.s.cfg.Retry.attempts() }

// tryDeadline is the deadline of the try about to start at now: the request's deadline, or,
// for a buffered answer that another try may follow, half the time left, so that a worker
// that hangs leaves time to retry elsewhere within the request's deadline. A streamed try
// always has all that is left: the forward's deadline bounds the stream's body too, and a
// stream may rightly last as long as the request may.
func (a *attempt) tryDeadline(stream bool, now time.Time) time.Time {
	if stream || a.last() {
		return a.deadline
	}
	return now.Add(a.deadline.Sub(now) / 2)
}

// retryable reports whether an answer (status, or the transport error err) is worth another
// worker: a transport error, or a retryable status while attempts are left.
func (a *attempt) retryable(status int, err error) bool {
	if err == nil && retryableStatus(status) && a.last() && a.retries() {
		a.exhausted = true // the failure goes to the client as it is
	}
	return err != nil || !a.last() && retryableStatus(status)
}

// retries reports whether the request may be retried at all.
func (a *attempt) retries() bool { return !a.once && a.s.cfg.Retry.attempts() > 1 }

// answered notes how main's try under way ended at now (the server clock's Nanos): the worker's answer
// status, or the transport error err.
func (a *attempt) answered(status int, err error, now int64) {
	if a.tries == 0 || int(a.tries) > len(a.tryLog) {
		return
	}
	t := &a.tryLog[a.tries-1]
	t.Ended = now
	switch {
	case err == nil:
		t.Status = int16(status)
	case isTimeout(err):
		t.Failure = telemetry.TryTimeout
	default:
		t.Failure = telemetry.TryUnreachable
	}
}

// isTimeout reports an error that says it is a timeout.
func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// retry gives up the attempt under way, which failed on w before the client saw a byte, at
// time now. It says whether another attempt may follow and after which pause: while attempts
// are left and the pause ends before the request's deadline. A pause that would reach the
// deadline is not taken at all: the attempt after it would have no time left. What the legs
// still hold is abandoned, and w is excluded from the next picks.
func (a *attempt) retry(w *worker.Worker, now time.Time) (time.Duration, bool) {
	a.main.abandon()
	a.prefill.abandon()
	a.encode.abandon()
	a.req.Exclude = append(a.req.Exclude, w)
	n := a.failures
	a.failures++
	if a.once || a.failures >= a.s.cfg.Retry.attempts() {
		a.exhausted = a.retries()
		return 0, false
	}
	pause := a.s.cfg.Retry.backoff(n)
	if pause >= a.deadline.Sub(now) {
		return 0, false
	}
	if a.tries > 0 && int(a.tries) <= len(a.tryLog) {
		t := &a.tryLog[a.tries-1]
		if t.Ended == 0 {
			t.Ended = a.s.nanosOf(now)
		}
		t.Backoff = int64(pause)
	}
	return pause, true
}

// served tells rt's picker which worker served the request when a retry moved it away from
// the first pick (cache_aware then records the prefix for that worker).
func (a *attempt) served(rt *policy.Route, w *worker.Worker) {
	if w != a.first {
		if rec, ok := rt.Picker.(policy.Recorder); ok {
			rec.Record(a.req, w)
		}
	}
}

// take moves l out of the attempt to a new owner (a prefill or encode leg to its
// evloop.Call, which may outlive the request).
func (a *attempt) take(l *leg) leg {
	moved := *l
	*l = leg{}
	return moved
}

// leg is what a request holds on one worker: the breaker's permit from the pick on and, from
// dispatch until the worker's answer has ended, the worker's hold (and a unit of its routing
// key's count). Its zero value holds nothing. Exactly one of settle, end or abandon releases
// it.
type leg struct {
	w      *worker.Worker
	permit breaker.Permit
	hold   worker.Hold
	clock  clock.Clock      // the server's, for the stamps of the answer's first byte and end
	keys   *policy.KeyLoads // set when the leg counts against the request's routing key
	key    uint64
}

// firstByte records that the worker's answer to the leg started (its status line arrived).
func (l *leg) firstByte() {
	if l.hold.Held() {
		l.hold.FirstByte(l.clock.Nanos())
	}
}

// settle ends the leg with its worker's answer: the status, or the transport error err. The
// breaker learns how the worker did and the upstream counter counts the answer.
func (l *leg) settle(status int, err error) {
	if err != nil {
		l.end(breaker.Fault, worker.OutcomeError)
		return
	}
	l.firstByte()
	l.end(breaker.Classify(status, false), worker.OutcomeOf(status))
}

// end ends the leg with the breaker outcome o, counting the answer under the upstream
// outcome class u.
func (l *leg) end(o breaker.Outcome, u int) {
	w := l.w
	l.release(o)
	w.Upstream[u].Inc()
}

// abandon ends the leg, if it holds anything, without an answer that says anything about
// the worker: it only frees what the leg holds (a half-open breaker's probe slot included).
func (l *leg) abandon() {
	if l.w != nil {
		l.release(breaker.Abandoned)
	}
}

func (l *leg) release(o breaker.Outcome) {
	l.hold.End()
	if l.keys != nil {
		l.keys.Add(l.key, -1)
	}
	l.w.Breaker.Record(l.permit, o, l.clock.Nanos())
	*l = leg{}
}
