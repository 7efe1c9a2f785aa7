package breaker

// State is a breaker's state, numbered as the spec product encodes smg_worker_cb_state.
type State uint8

const (
	// Closed: requests flow; faults are counted.
	Closed State = 0
	// Open: the worker receives no requests until Timeout has passed.
	Open State = 1
	// HalfOpen: a bounded number of probe requests decide between Closed and Open.
	HalfOpen State = 2

	numStates = 3
)

var stateNames = [numStates]string{"closed", "open", "half_open"}

// String returns the state's metric label: closed, open or half_open.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Outcome classifies how one request to a worker ended, from the worker's point of view.
type Outcome uint8

const (
	// Success: the worker answered (1xx to 3xx).
	Success Outcome = iota
	// Fault: the worker is broken: no connection, a reset, a timeout, a 5xx other than 503,
	// or a stream that failed after its first byte.
	Fault
	// Backpressure: 429 or 503, the worker is busy, not broken. It feeds load signals, not
	// the breaker: neither a success nor a fault.
	Backpressure
	// ClientError: a 4xx other than 429, the client's mistake. The worker did its job, so it
	// counts as a success.
	ClientError
	// Abandoned: the request ended without telling anything about the worker (the client
	// went away before the worker answered). It only frees a half-open probe slot.
	Abandoned
)

var outcomeNames = [...]string{"success", "fault", "backpressure", "client_error", "abandoned"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Classify maps an upstream answer to an Outcome. transportErr reports that no HTTP response
// arrived (connection refused or reset, timeout); status is then ignored. A status outside
// 100-599 without a transport error is a broken answer, hence a Fault.
func Classify(status int, transportErr bool) Outcome {
	switch {
	case transportErr:
		return Fault
	case status == 429 || status == 503:
		return Backpressure
	case status >= 500 && status <= 599:
		return Fault
	case status >= 400 && status <= 499:
		return ClientError
	case status >= 100 && status <= 399:
		return Success
	}
	return Fault
}

// Permit is what TryAcquire hands out and Record takes back: it tells Record whether the
// request was a half-open probe and of which half-open episode, so that outcomes of requests
// admitted under an earlier decision never move the probe accounting of a later one. It is a
// plain value: store it with the request, no allocation.
type Permit struct {
	// episode is the packed word (state and since, without counters) of the half-open
	// episode that admitted the probe; 0 for a request admitted while closed.
	episode uint64
}

// Probe reports whether the permit admitted a half-open probe.
func (p Permit) Probe() bool { return p.episode != 0 }
