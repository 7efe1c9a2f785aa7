// Package bench is the benchmark harness behind `make bench` and `make bench-smoke`, and the
// project's performance regression gate. It runs the real binaries on loopback and compares
// what it measures within one run (the gateway against the workers it fronts, against a bare
// fasthttp proxy, nginx and HAProxy; one policy against another), never against fixed
// numbers, because these machines are shared and noisy (docs/architecture.md). docs/benchmarks.md
// has the latest table and how to read it.
//
// Four suites, each usable alone (cmd/smgbench --suites):
//
//   - Overhead: a closed loop of small JSON requests, then of SSE streams, straight to an
//     instant mock worker and through each proxy (smg per policy, bench/bareproxy, nginx,
//     HAProxy) alone on one core (taskset, GOMAXPROCS=1 or one worker process). Reports
//     requests/s, p50/p99 and added latency, TTFT, and the proxy's CPU time (its threads'
//     /proc/<pid>/task/*/schedstat, ns) per request and per SSE event. EnsurePeers installs nginx and
//     HAProxy from Debian's packages when missing and running as root; a peer that cannot be
//     installed gets a "not installed" row and its gates are skipped. Then the paced SSE
//     rows (full runs only; OverheadConfig.PacedRounds, smgbench --paced-*): a fleet of its
//     own writing a stream's tokens 20 ms apart, as an engine's inter-token latency spaces
//     them, 256 connections, so that every proxy reads and writes each event on its own;
//     direct, smg, nginx and HAProxy (the bare proxy does not stream and is not measured),
//     with loadgen's TTFT and ITL to show the load core kept pace. Then the PD rows: a
//     prefill and a decode mock (--role), loadgen straight to both (its --pd-* mode, SGLang's
//     mini load balancer's part) and through smg --pd-disaggregation, each smg PD request's
//     CPU compared with the regular smg rows of the same run (OverheadConfig.PDRounds).
//     Then the data plane's target rows, every proxy again: an open loop at 2,000 req/s (CPU per
//     request, added p50), one paced stream at a time (added TTFB), the JSON and paced
//     loads with the proxy's system calls counted (perf stat -e raw_syscalls:sys_enter), and
//     the JSON closed loop with each proxy on one core and on two (OverheadConfig.OpenLoop*,
//     Unloaded*, SyscallRounds, ScalingRounds), and through smg with every request traced
//     against untraced, the spans exported to an OTLP receiver in the harness
//     (OverheadConfig.TracingRounds).
//   - Micro: `go test -bench -benchmem` over the hot-path benchmarks (HotPathSuites), parsed
//     by ParseBenchOutput; CheckAllocs fails on any non-zero allocs/op.
//   - Quality: engine-mode mocks (continuous batching, prefix-cached KV, time-scaled) behind
//     the gateway, one fresh fleet and gateway per row, per case (shared-prefix, multi-turn,
//     mixed-size, and a heterogeneous fleet whose workers 6 and 7 decode twice as slowly):
//     every policy saturated in a closed loop (capacity = completed requests per second of
//     model time, cache hit rate, TTFT, TPOT, busiest worker's share), then round robin and
//     the load-aware policies at 70% of round robin's measured capacity in an open loop,
//     three times; ratios to round robin, cache_aware beside SGLang's published ones, and
//     WriteQualityHTML's offline bar charts. Each row records the CPU its processes and the
//     whole machine used, so a row limited by the machine rather than the engines shows.
//   - Routes (routes.go, `make bench` only): the engine pass-through routes and EPD under
//     wrk (loadgen speaks only the generation APIs), straight to an instant mock and through
//     smg, smg's CPU per request against the chat route's of the same
//     gateway; EPD's image requests (three upstream requests) against text-only ones (PD) on
//     the same EPD gateway.
//
// Report.Metrics flattens a run into named values; a Baseline (bench/baseline.json,
// bench/baseline-smoke.json) gates some of them, each with a direction and a relative
// tolerance, and Check names every metric that regressed. The host's steal (steal.go) is
// part of the judgement: Report.Measured gives every overhead metric the steal of the rows
// it came from, Check does not judge one past stealLimit, and NoneJudged fails a run in
// which no overhead gate could be judged.
//
// Concurrency: the suites run their processes one measurement at a time from the calling
// goroutine; a started process's output is collected by os/exec into a mutex-guarded buffer
// (syncbuf.Buffer) that waitOutput polls. Every process a suite starts is stopped by its own
// handle (SIGINT, then SIGKILL after 10 s) before the suite returns, on every path.
//
// Buffers: nothing is shared between runs; each loadgen run writes its JSON result to its
// own file in the suite's work directory, which the suite removes unless the caller gave it.
package bench
