// Package workertest holds what tests of the packages around worker need and production code
// must not have. Fleet registers large fleets in a real worker.Registry for the tests and
// benchmarks of the packages that serve fleets (health checks, load polling): it adds n
// workers from several goroutines at once, so the registry's writer applies them in bursts
// and publishes once per burst, where one Add at a time publishes n snapshots of up to n
// workers each. Ready makes one ready worker. The Note* functions set a worker's bookkeeping
// one counter at a time (load for the policies' tests, first-byte waits for the stall
// monitor's), which the request path moves only through worker.Hold; internal/archtest keeps
// this package out of production code.
package workertest
