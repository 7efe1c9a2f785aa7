// Package clock is the one time source of the control plane: Real in production, Fake in
// tests, behind one interface (docs/architecture.md: timers come from an injected clock, so tests are
// deterministic and need no sleeps).
//
// Nanos is the hot path's clock: int64 monotonic nanoseconds since the process started, read
// without an interface call (the circuit breaker stamps every attempt with it).
//
// # Concurrency
//
// Real and Fake are safe for concurrent use. A Fake moves only when the test calls Advance,
// which fires, in the calling goroutine, every timer and ticker that falls due (a ticker
// sends at most one tick per Advance and none while its last is unread, as time.Ticker).
package clock
