// Package testhooks hands a worker's bookkeeping methods to worker/workertest. Package worker
// keeps them unexported so that the request path changes a worker's counters only through
// worker.Hold, which undoes each change exactly once; tests of the policies and of the stall
// monitor still set those counters one by one, and Go's internal rule lets only packages under
// worker/ import this one.
package testhooks

// Notes are the bookkeeping methods of a worker of type W (*worker.Worker; a type parameter
// because this package cannot import worker, which imports it).
type Notes[W any] struct {
	// Dispatch credits a request of tokens tokens (-1: unknown) dispatched to the worker.
	Dispatch func(w W, tokens int)
	// Awaiting counts a request waiting for its first token; FirstToken ends that wait.
	Awaiting, FirstToken func(w W, tokens int)
	// Sent starts a request's wait for its first byte at now; FirstByte ends it with the
	// answer's first byte at now, NoFirstByte without one.
	Sent        func(w W, now int64)
	FirstByte   func(w W, sent, now int64)
	NoFirstByte func(w W)
	// Decode records one answer's decode step in nanoseconds.
	Decode func(w W, stepNanos int64)
}

var notes any

// Set stores n; package worker calls it once, when it initializes.
func Set[W any](n Notes[W]) { notes = n }

// Get returns what Set stored; it panics unless Set was called with the same W.
func Get[W any]() Notes[W] { return notes.(Notes[W]) }
