//go:build !linux

package stream

// threadCPU is not measured off Linux; the cpu-ns/token metric reads 0.
func threadCPU() int64 { return 0 }
