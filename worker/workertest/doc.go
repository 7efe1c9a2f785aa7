// Package workertest registers large fleets in a real worker.Registry for the tests and
// benchmarks of the packages that serve fleets (health checks, load polling): Fleet adds n
// workers from several goroutines at once, so the registry's writer applies them in bursts
// and publishes once per burst, where one Add at a time publishes n snapshots of up to n
// workers each.
package workertest
