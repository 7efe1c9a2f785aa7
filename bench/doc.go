// Package bench is the benchmark harness behind `make bench`: it runs the real binaries on
// loopback, pinned to cores, and compares what it measures within one run (the gateway against
// the workers it fronts, against a bare fasthttp proxy), never against fixed numbers, because
// these machines are shared and noisy (DESIGN.md §8, §9).
//
// The overhead suite (Overhead) measures what the gateway adds to a small non-streamed JSON
// request: requests/s through smg and straight to a worker, their ratio, p50/p99 latency of
// both, and the CPU time the proxy process spends per 10,000 requests, read from
// /proc/<pid>/stat. A bare fasthttp round-robin proxy (bench/bareproxy) runs in the same
// setup as the reference the gateway must not exceed.
package bench
