// Package stall keeps work away from a worker that stopped answering, long before its health
// checks notice (issue 17 item 5).
//
// A stopped engine (SIGSTOP, a wedged process) still accepts TCP connections: the kernel
// completes the handshakes and buffers the requests. Health probes with a 5 s timeout every
// 60 s need three failures to mark it, and meanwhile a load-aware policy sees an engine with
// requests in flight, and cache_aware keeps sending it the prefix it holds: 16 requests waited
// 7 s on such a worker while the other one was idle. The gateway sees what no probe does: the
// request path records, per worker (worker/stall.go), how many requests wait for their first
// byte and when the worker last gave one.
//
// # The rule
//
// A worker's silence is how long requests have waited on it with no first byte from it for
// any request (counted from its last first byte, or from when a request started waiting on
// it while none was). A Monitor checks every Interval (250 ms):
//
//   - silence > max(MinSilence, Factor × the fleet's typical time to first byte) makes the
//     worker silent, unless no other ready worker is answering: it gets no new requests
//     (worker.Routable), its waiting requests keep waiting, and it is probed: GET /health on
//     its client, any HTTP answer within ProbeTimeout counts as alive.
//   - a silent worker whose probe got no answer is unresponsive: the requests waiting for its
//     first byte are cut (worker.ErrWorkerUnresponsive, checked every 250 ms while a round
//     trip waits), which the breaker counts as faults and the gateway retries elsewhere, as
//     any try that failed before the first byte. It is probed again every MinSilence.
//   - any first byte from the worker ends either state at once (on the request path); a
//     silent worker whose silence falls back under the threshold, and an unresponsive one
//     whose probe is answered, are routable again.
//
// The typical time to first byte is an exponentially weighted mean of the times measured on
// every worker (status line of a stream, the whole answer of a non-streamed request), taken
// each Interval with weight Alpha.
//
// # False positives
//
// Silence is not the age of one request: a busy worker answers some request now and then, so
// a saturated but healthy fleet is never silent, whatever its queues (and its typical time to
// first byte grows with them). A long prefill of a huge prompt on an otherwise idle worker can
// be silent for longer than the threshold; it then gets no new work until it answers (other
// workers take it, which is what it can do), but its own request is not cut: its engine's HTTP
// server still answers the probe. Only a worker whose HTTP server does not answer at all has
// its requests cut. A lone worker, or a fleet where no worker answers, is never excluded.
//
// # Concurrency
//
// Run owns one goroutine; a probe runs on its own goroutine, at most one per worker at a
// time, bounded by ProbeTimeout. The request path only adds to atomics on the worker.
package stall
