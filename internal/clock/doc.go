// Package clock is the one time source of the control plane: Real in production, Fake in
// tests, behind one interface (docs/architecture.md: timers come from an injected clock, so tests are
// deterministic and need no sleeps).
//
// Time comes in two units from the same clock: Now for wall time, Nanos for int64 monotonic
// nanoseconds (the request path's stamps: breaker, stall, in-flight ages). The package
// function Nanos is Real's, read without an interface call where the hot path cannot take an
// injected clock (the circuit breaker stamps every attempt with it); everything else takes a
// Clock, so a Fake drives it.
//
// # Concurrency
//
// Real and Fake are safe for concurrent use. A Fake moves only when the test calls Advance,
// which fires, in the calling goroutine, every timer and ticker that falls due (a ticker
// sends at most one tick per Advance and none while its last is unread, as time.Ticker).
package clock
