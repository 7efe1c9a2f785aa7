//go:build !linux

package policytest

// threadCPU is not measured outside Linux: CPUPerOp then reports 0.
func threadCPU() int64 { return 0 }
