// Package policytest builds real worker fleets for policy tests and benchmarks: a
// worker.Registry with N Ready workers on loopback URLs that are never dialled, plus helpers
// that change a worker's status synchronously and give it a load report.
//
// Concurrency: a Fleet is meant for one test goroutine; the workers it returns are safe for
// concurrent picks like any registry's workers.
//
// # Ownership
//
// A Fleet owns its registry and closes it when the test ends; Group returns fresh slices.
package policytest
