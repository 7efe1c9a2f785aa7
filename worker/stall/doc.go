// Package stall keeps work away from a worker that stopped answering, long before its health
// checks notice.
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
// it while none was). A Monitor checks every Interval (250 ms), against the threshold
// max(MinSilence, Factor × the fleet's typical time to first byte):
//
//   - silence > half the threshold: the worker is probed (GET /health on its client, any
//     HTTP answer within ProbeTimeout, 1 s, and at most half the threshold, counts as
//     alive), so that the verdict is in when the silence reaches the threshold. Nothing
//     else changes yet.
//   - silence > the threshold makes the worker silent: it gets no new requests
//     (worker.Routable); its waiting requests keep waiting while its probe is out or was
//     answered.
//   - a silent worker whose probe of this silence got no answer is unresponsive: the requests
//     waiting for its first byte are cut (worker.ErrWorkerUnresponsive, seen within 250 ms
//     by a round trip that waits), which the breaker counts as faults and the gateway
//     retries elsewhere, as any try that failed before the first byte. Nothing had reached
//     their clients, so the retry is safe. It is probed again every MinSilence.
//   - any first byte from the worker ends either state at once (on the request path); a
//     silent worker whose silence falls back under the threshold, and an unresponsive one
//     whose probe is answered, are routable again.
//
// At the defaults a stopped worker's waiting requests are thus cut about 2.25 s after they
// began waiting (2 s plus a check), where an unanswered 5 s probe started at exclusion made
// it 7.4 s (docs/reliability.md quotes both runs).
//
// Only a worker whose requests have somewhere else to go is excluded: for every model it
// serves, another ready worker of its type (a PD leg picks among its own type) serving that
// model, or of unknown model (those serve any), answers. The lone worker of a model keeps
// its requests whatever the workers of other models do, and so does the lone prefill worker
// whatever the decode workers do.
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
// server still answers the probe. Only a worker whose HTTP server does not answer at all
// within the probe's second has its requests cut. A lone worker of its model, or a model
// whose workers all stopped answering, is never excluded.
//
// # Concurrency
//
// Run owns one goroutine; a probe runs on its own goroutine, at most one per worker at a
// time, bounded by ProbeTimeout. The request path only adds to atomics on the worker.
package stall
