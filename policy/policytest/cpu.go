package policytest

import (
	"runtime"
	"testing"
)

// CPUPerOp starts measuring the CPU time of the benchmark's loop; the returned stop reports it
// per op as "cpu-ns/op" beside ns/op. The loop runs on one locked OS thread, whose CPU time
// leaves out the time other processes held the core: on the shared development machine wall
// time per op grows with the load average, CPU time much less. Call it right before the loop
// and stop right after it.
func CPUPerOp(b *testing.B) (stop func()) {
	runtime.LockOSThread()
	start := threadCPU()
	return func() {
		used := threadCPU() - start
		runtime.UnlockOSThread()
		b.ReportMetric(float64(used)/float64(max(b.N, 1)), "cpu-ns/op")
	}
}
