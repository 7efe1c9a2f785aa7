package worker

// Hold is one request's bookkeeping on a worker, from the moment it leaves for the worker
// to the end of the worker's answer: a unit of the in-flight count, the dispatch credit the
// load-aware scores read (SinceReport), the wait for the answer's first byte that
// worker/stall reads (Silence) and, for an answer whose pieces the gateway relays, the wait
// for its first token that the expected-wait score reads (Awaiting). Production code changes
// these counters through a Hold only, so that every change is undone exactly once (tests set
// them one by one with worker/workertest).
//
// The zero value holds nothing. A Hold belongs to one request (it is not safe for
// concurrent use) and may be moved by value to a new owner; after Begin, exactly one End.
// Times are clock.Nanos readings.
type Hold struct {
	w      *Worker
	tokens int
	// sent is when the request left, while it waits for the first byte; 0 once it came.
	sent     int64
	awaiting bool
}

// Begin takes the hold on w for a request of tokens tokens (-1: unknown) that leaves for
// it at now.
func (h *Hold) Begin(w *Worker, tokens int, now int64) {
	*h = Hold{w: w, tokens: tokens, sent: max(now, 1)}
	w.noteDispatch(tokens)
	w.InFlight.Add(1)
	w.noteSent(h.sent)
}

// AwaitFirstToken counts the request among the worker's requests awaiting their first token
// until FirstToken or End: call it for an answer whose first token the caller sees arrive.
func (h *Hold) AwaitFirstToken() {
	if h.w != nil && !h.awaiting {
		h.awaiting = true
		h.w.noteAwaiting(h.tokens)
	}
}

// FirstByte records the answer's first byte arriving at now; later calls do nothing.
func (h *Hold) FirstByte(now int64) {
	if h.sent != 0 {
		h.w.noteFirstByte(h.sent, now)
		h.sent = 0
	}
}

// FirstToken records that the answer's first token arrived; later calls do nothing.
func (h *Hold) FirstToken() {
	if h.awaiting {
		h.w.noteFirstToken(h.tokens)
		h.awaiting = false
	}
}

// End releases what the hold still holds (an answer that never started stops waiting, the
// in-flight unit is given back) and leaves it holding nothing.
func (h *Hold) End() {
	if h.w == nil {
		return
	}
	if h.sent != 0 {
		h.w.noteNoFirstByte()
	}
	h.FirstToken()
	h.w.InFlight.Add(-1)
	*h = Hold{}
}

// Held reports whether the hold is taken (between Begin and End).
func (h *Hold) Held() bool { return h.w != nil }
