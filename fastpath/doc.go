// Package fastpath is the gateway's request hot path on fasthttp: routing by path, extraction
// of routing fields, pick, forward, relay, the error envelopes, the worker API and the probes.
//
// # One request
//
// A POST to /v1/chat/completions, /v1/completions or /generate is served in the fasthttp
// handler goroutine without allocating in steady state: a pooled exchange holds the extracted
// fields (fastpath/extract) and the policy.Request built from them; the route table is one
// atomic load (policy.Router.Current); the chosen worker's pooled HostClient forwards the
// client's own request object, body bytes unchanged, with only the Host, X-Request-Id,
// X-SMG-Hop (loops.go: a request that comes back is refused) and (for workers with an API
// key) Authorization headers rewritten. The body was read by Handle, into a pooled buffer
// that grows as bytes arrive under a memory budget shared by all requests (body.go), never
// sized from the declared Content-Length. A body larger than --max-buffered-request-bytes
// is not read whole: after its head, it is streamed to the worker as it arrives, unparsed
// and never retried (streamed.go).
//
// While the gateway waits for the worker's first byte, the worker's connection checks that
// the client is still there (abandon.go): a client that leaves ends the round trip, closing
// the worker's connection, instead of holding the worker until the request's deadline.
//
// The engine pass-through routes (/v1/embeddings, /v1/rerank, /rerank, /v1/classify,
// /v1/tokenize, /v1/detokenize, /v1/responses, /v1/messages) take the same path: their
// routing text is extracted per route, and they are picked, admitted, retried, counted and
// relayed exactly as generation is. /v1/responses is stateless: forwarded, never stored. In
// PD mode they answer 501: a PD worker only takes generation with a KV handover.
//
// EPD mode (epd.go) is PD mode with an encode leg: a generation request with images, audio
// or video first goes to an encode worker (its own leg of the attempt, with its in-flight
// hold, breaker permit, retries and client-hang-up watch), and only a 2xx there starts the
// PD legs, whose bodies then name the encode worker's room (fastpath/disagg); a request
// without media runs as PD. On the evloop plane the encode leg is an evloop.Call that the
// exchange awaits before the PD legs start (epd_loop.go).
//
// A non-streamed answer is read whole into the client's response object and written back by
// fasthttp. A streamed answer (the body says "stream": true) is relayed: the upstream body
// becomes the client response's body stream, which fasthttp copies chunk by chunk, flushing
// each upstream read, so every SSE event reaches the client as it arrives; if the client goes
// away, the write fails, the relay closes the upstream connection, and the engine sees its
// request cancelled.
//
// # Two data planes
//
// --data-plane fasthttp serves every route as described above. --data-plane evloop, the
// default, serves the generation and pass-through routes from epoll event loops (fastpath/evloop, one per
// GOMAXPROCS, connections dealt to them in turn), and the worker connections of a request are
// driven by the loop of its client connection: one read per readiness event instead of Go's
// read-until-EAGAIN, one write per connection and wake-up, no goroutine per connection
// (evplane.go). A generation or pass-through request runs entirely on its loop without
// allocating: the same extraction, the same attempt (pick, admission without waiting, in-flight
// holds, breaker permits, retries with the backoff as a loop timer, a wait in the admission
// queue parked on the loop), its answer held whole or,
// for a successful stream, relayed as it arrives with the worker's reads framed into the
// client's output; a client that hangs up closes the worker connection at once. A body past
// --max-buffered-request-bytes streams through the loop to the worker (streamed.go). PD runs on
// the loop too (evpd.go): the prefill leg is an evloop.Call beside the decode forward
// (SGLang) or before it (vLLM), and a client that leaves cancels both legs; EPD's encode leg
// is a Call before them (epd_loop.go), cancelled too. Workers behind TLS are served on the
// loops as well, every leg and streamed bodies included (evloop/tls.go). Everything else on
// the evloop plane is bridged: the loop hands the request to a goroutine that runs the
// fasthttp handler (Handle) and streams its answer back through the loop, with the loop's
// backpressure. That covers the worker API, the probes, /v1/models and the admin routes. The
// fasthttp generation path stays as --data-plane fasthttp, the benchmark's comparison and the
// way back (docs/benchmarks.md, "Event-loop data plane"); no worker needs it any more.
//
// # One attempt path
//
// What a request holds and how it ends does not depend on how its bytes travel: the attempt
// type (attempt.go) owns it for every data plane, the regular and the PD path alike. It takes
// the admission slot (--max-concurrent-requests, --queue-size, --queue-timeout-secs,
// --rate-limit-tokens-per-second; on atomics, only a request that must queue allocates),
// picks workers that their circuit breaker admits (a half-open breaker admits only a few
// probes; a refusal re-picks without costing an attempt), holds each picked worker's
// in-flight count from dispatch until its answer has ended (a leg), settles a leg with its
// answer (worker/breaker.Classify: faults, backpressure, client errors; the upstream
// counters) or abandons it, and decides retries. Its end releases whatever is still held, on
// every path (answer, error, panic, a client that left); a streamed answer's leg and the
// admission slot are handed to the relay, which releases them when fasthttp closes it.
//
// # Retries and the request's deadline
//
// A transport error or a retryable status (408, 429, 500, 502, 503, 504) is retried on
// another worker (in PD mode: another pair), re-picked with the failed ones excluded, with
// exponential backoff, as long as nothing has reached the client. A streamed error answer is
// read whole so that it can be retried like a buffered one. One deadline bounds the whole
// request: --request-timeout-secs from admission on covers every upstream round trip, the
// streamed answer and every backoff pause. No try gets a fresh timeout: a buffered try that
// another may follow is cut at half the time left, so that a worker that hangs leaves time to
// retry elsewhere; a streamed try, and the last one, may use all that is left. A retry whose
// pause would reach the deadline is not made, and the last failure is the answer. During a pause the handler watches the client's socket without reading it
// (pause_unix.go): a client that leaves ends the request at once. In-memory and TLS
// connections cannot be watched; there the pause is a plain sleep, still bounded by the
// deadline.
//
// # In-flight accounting
//
// The worker's InFlight count rises once at dispatch and falls exactly once: for a buffered
// answer when the upstream round trip returns (success or error), for a relayed one when
// fasthttp closes the relay's body stream, which it does when the body is written, when the
// write fails, and when the response is reset without being written. The attempt's end
// covers panics between dispatch and hand-off.
//
// # Errors
//
// Gateway-made errors on the OpenAI routes use the OpenAI envelope
// {"error":{"message","type","code","param"}} with an X-SMG-Error-Code header, mapped from
// the cause in one place (errors.go). The worker API answers {"error","code"} like the spec
// product.
package fastpath
