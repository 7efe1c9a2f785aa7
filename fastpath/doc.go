// Package fastpath is the gateway's request hot path: routing by path, extraction of routing
// fields, pick, forward, relay, the error envelopes, the worker API and the probes.
//
// # One data plane
//
// Every client connection is served by the epoll event loops of fastpath/evloop, one per
// GOMAXPROCS, connections dealt to them in turn, and the worker connections of a request are
// driven by the loop of its client connection: one read per readiness event instead of Go's
// read-until-EAGAIN, one write per connection and wake-up, no goroutine per connection
// (evplane.go). The generation routes (/v1/chat/completions, /v1/completions, /generate) and
// the engine pass-through routes (/v1/embeddings, /v1/rerank, /rerank, /v1/classify,
// /v1/tokenize, /v1/detokenize, /v1/responses, /v1/messages) run on the loops; every other
// request is bridged: the loop hands it to a goroutine that runs the fasthttp handler
// (serveBridged) and streams its answer back through the loop, with the loop's backpressure.
// That covers the worker API, the probes, /v1/models, /mesh/status, the admin routes
// (/get_loads, /flush_cache, /get_model_info, /get_server_info, /health_generate,
// /engine_metrics) and a method other than POST on a generation route (405). Prometheus
// metrics and pprof are served apart, on --prometheus-port (cmd/smg).
//
// There is no second data plane: the loops measured cheaper than a goroutine-per-connection
// fasthttp plane in every case, TLS workers included (docs/benchmarks-history.md);
// --data-plane still accepts evloop for the command lines of earlier versions
// (docs/differences.md).
//
// # One request
//
// A POST to a generation or pass-through route runs entirely on its loop without allocating
// in steady state: the loop exchange (evplane.go) holds the extracted fields
// (fastpath/extract) and the policy.Request built from them; the route table is one atomic
// load (policy.Router.Current); the request goes to the chosen worker with its body bytes
// unchanged and only the Host, X-Request-Id, X-SMG-Hop (loops.go: a request that comes back
// is refused) and (for workers with an API key) Authorization headers rewritten. The body is
// read by the loop into a buffer that grows as bytes arrive under a memory budget shared by
// all requests (body.go), never sized from the declared Content-Length. A body larger than
// --max-buffered-request-bytes is not read whole: after its head, it is streamed to the
// worker as it arrives, unparsed and never retried (streamed.go).
//
// The answer is held whole, so that a retryable one can go to another worker, or, for a
// successful stream (the body says "stream": true), relayed as it arrives, the worker's reads
// framed into the client's output, every SSE event flushed before the loop sleeps again. A
// worker that breaks mid-stream ends the stream with an SSE error event and [DONE]. A client
// that hangs up, at any point, closes the worker connection at once: the engine sees its
// request cancelled.
//
// The pass-through routes take the same path: their routing text is extracted per route,
// and they are picked, admitted, retried, counted and relayed exactly as generation is.
// /v1/responses is stateless: forwarded, never stored. In PD mode they answer 501: a PD
// worker only takes generation with a KV handover.
//
// PD mode (pd.go, evpd.go) sends each request to a prefill and a decode worker: the prefill
// leg is an evloop.Call beside the decode forward (SGLang) or before it (vLLM), and a client
// that leaves cancels both legs. EPD mode (epd.go, epd_loop.go) adds an encode leg for
// requests with images, audio or video: a Call that the exchange awaits before the PD legs
// start, whose bodies then name the encode worker's room (fastpath/disagg). Workers behind
// TLS are served on the loops too, every leg and streamed bodies included (evloop/tls.go).
//
// # One attempt path
//
// What a request holds and how it ends is owned by the attempt type (attempt.go), for the
// regular, PD and EPD paths alike. It takes the admission slot (--max-concurrent-requests,
// --queue-size, --queue-timeout-secs, --rate-limit-tokens-per-second; on atomics; a request
// that must wait parks on its loop, no goroutine, and a client that leaves frees its place
// at once), picks workers that their circuit breaker admits (a half-open breaker admits only
// a few probes; a refusal re-picks without costing an attempt), holds each picked worker's
// in-flight count from dispatch until its answer has ended (a leg), settles a leg with its
// answer (worker/breaker.Classify: faults, backpressure, client errors; the upstream
// counters) or abandons it, and decides retries. Its end releases whatever is still held, on
// every path (an answer, an error, a client that left).
//
// # Retries and the request's deadline
//
// A transport error or a retryable status (408, 429, 500, 502, 503, 504) is retried on
// another worker (in PD mode: another pair; in EPD mode: another triple), re-picked with the
// failed ones excluded, with exponential backoff, as long as nothing has reached the client.
// One deadline bounds the whole request: --request-timeout-secs from admission on covers
// every upstream round trip, the streamed answer and every backoff pause. No try gets a fresh
// timeout: a held try that another may follow is cut at half the time left, so that a worker
// that hangs leaves time to retry elsewhere; a streamed try, and the last one, may use all
// that is left. A retry whose pause would reach the deadline is not made, and the last
// failure is the answer. The pause is a loop timer: a client that leaves during it ends the
// request at once.
//
// # In-flight accounting
//
// The worker's InFlight count rises once at dispatch and falls exactly once, when the
// worker's answer has ended: held or relayed to its end, failed, or cut because the client
// left or the request gave the leg up (a PD leg whose other leg failed).
//
// # Errors
//
// Gateway-made errors on the OpenAI routes use the OpenAI envelope
// {"error":{"message","type","code","param"}} with an X-SMG-Error-Code header, mapped from
// the cause in one place (errors.go). The worker API answers {"error","code"} like the spec
// product.
//
// # Deviations from docs/architecture.md
//
//   - The loops are our own epoll loops (fastpath/evloop), not gnet/v2's engine: gnet cannot
//     stop reading one connection, so it cannot bound a slow client's buffer, and it has no
//     per-connection timers (evloop's package doc).
//   - The worker connections of the generation routes are the loops' own, not the worker's
//     pooled fasthttp.HostClient (docs/architecture.md, step 4); the HostClient serves the probes,
//     the load monitor, model discovery and the admin routes' fan-out.
//   - The non-generation routes are not served by a fasthttp server of their own but bridged
//     from the loops to the fasthttp handler, so that one listener serves every route.
package fastpath
