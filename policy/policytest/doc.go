// Package policytest builds real worker fleets for policy tests and benchmarks: a
// worker.Registry with N Ready workers on loopback URLs that are never dialled, plus helpers
// that change a worker's status synchronously and give it a load report.
//
// Simulate (sim.go) routes a trace with a policy over simulated continuous-batching engines
// (mockworker --mode engine reduced to what routing quality depends on, prefix caches sized in
// groups or in tokens) on a synthetic clock, and measures TTFT, hit rate and shares. Traces:
// PoissonTrace with SharedPrefix, MultiTurn, Distinct or MixedSizes, or SimConfig.Conversations,
// loadgen's multi-turn ready queue, whose turns come round as their answers complete.
//
// Concurrency: a Fleet is meant for one test goroutine; the workers it returns are safe for
// concurrent picks like any registry's workers.
//
// # Ownership
//
// A Fleet owns its registry and closes it when the test ends; Group returns fresh slices.
package policytest
