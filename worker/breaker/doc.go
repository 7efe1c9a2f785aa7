// Package breaker is a per-worker circuit breaker for the request hot path: lock-free,
// allocation-free, driven by a clock the caller passes in.
//
// # States
//
//	Closed   --FailureThreshold faults within Window, no success after them-->  Open
//	Open     --Timeout passed------------------------------------------------>  HalfOpen
//	HalfOpen --SuccessThreshold successful probes---------------------------->  Closed
//	HalfOpen --one faulty probe---------------------------------------------->  Open
//
// Closed admits everything, Open nothing, HalfOpen at most MaxHalfOpenProbes requests at a
// time (default SuccessThreshold), not all traffic. The transition from Open to HalfOpen is
// made lazily by the first call that observes the time has come (State, Available,
// TryAcquire, Stats); it is stamped with the exact due time, not the caller's.
//
// # Outcomes
//
// Classify applies the gateway's rules: connection failures, resets, timeouts and 5xx other
// than 503 are Faults; 429 and 503 are Backpressure (load signals, ignored here); other 4xx
// are the client's (ClientError), which count as a success for the worker; 1xx-3xx are
// Successes. A stream that fails after its first byte is recorded as a Fault when it ends.
// Abandoned (the client left before the worker answered) only frees a probe slot.
//
// # The failure window, exactly
//
// Window is cut into ten buckets of Window/10 each, by absolute time: t falls in bucket
// floor(t/(Window/10)). A Fault recorded while Closed is counted in its bucket and the
// breaker opens when the faults counted in the current bucket and the nine before it reach
// FailureThreshold. So a fault counts for at most Window and at least 9/10 of Window. A
// Success or ClientError recorded while Closed forgets all counted faults: the threshold is
// of faults in a row, like the spec product's consecutive-failure count, but unlike the spec
// product old faults really expire, so a worker that fails rarely never accumulates its way to
// an open breaker. Entering Closed starts from an empty window.
//
// # Permits
//
// TryAcquire returns a Permit that Record takes back. It tells Record whether the request
// was a half-open probe, and of which half-open episode. A probe's outcome counts only in the
// episode that admitted it; any other outcome counts only while the breaker is Closed (a
// fault seen while Closed is evidence about the worker now, whenever the request started). So
// a long stream admitted while Closed that ends while HalfOpen, or a probe whose episode has
// ended, can neither overdraw the probe slots nor close a breaker on evidence its probes did
// not produce.
//
// # Concurrency
//
// State, probe count, success count and the time the state was entered are packed into one
// atomic uint64; every transition is one compare-and-swap, made by exactly one goroutine,
// which then counts it and calls the OnTransition hook. The failure window is a ring of
// atomic buckets. No method locks or allocates; a Closed breaker's Available, TryAcquire and
// Record(Success) only load atomics (Record(Success) writes only when there are faults to
// forget), so a healthy worker's breaker costs no cache-line contention. Outcomes recorded
// concurrently take effect in some order, as if recorded one after the other.
//
// # Time
//
// Every method takes now, int64 nanoseconds of a monotonic clock with a fixed origin (clock.Nanos in
// production; tests pass a fake clock). Transitions are stamped in milliseconds, so Timeout
// has millisecond resolution.
//
// # Ownership
//
// A Breaker is a value meant to be embedded in the worker it guards; it must not be copied
// after first use. Metrics holds the worker's series and is owned by whoever registered the
// worker.
package breaker
