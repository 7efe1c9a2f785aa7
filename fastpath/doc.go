// Package fastpath is the gateway's request hot path on fasthttp: routing by path, extraction
// of routing fields, pick, forward, relay, the error envelopes, the worker API and the probes.
//
// # One request
//
// A POST to /v1/chat/completions, /v1/completions or /generate is served in the fasthttp
// handler goroutine without allocating in steady state: a pooled exchange holds the extracted
// fields (fastpath/extract) and the policy.Request built from them; the route table is one
// atomic load (policy.Router.Current); the chosen worker's pooled HostClient forwards the
// client's own request object, body bytes unchanged, with only the Host, X-Request-Id and
// (for workers with an API key) Authorization headers rewritten.
//
// A non-streamed answer is read whole into the client's response object and written back by
// fasthttp. A streamed answer (the body says "stream": true) is relayed: the upstream body
// becomes the client response's body stream, which fasthttp copies chunk by chunk, flushing
// each upstream read, so every SSE event reaches the client as it arrives; if the client goes
// away, the write fails, the relay closes the upstream connection, and the engine sees its
// request cancelled.
//
// # Retries, breakers, admission
//
// Before a worker is tried, its circuit breaker admits the attempt (a half-open breaker admits
// only a few probes; a refusal re-picks without costing an attempt), and every attempt tells
// the breaker how it ended (worker/breaker.Classify: faults, backpressure, client errors). A
// transport error or a retryable status (408, 429, 500, 502, 503, 504) is retried on another
// worker, re-picked with the failed ones excluded, with exponential backoff, as long as nothing
// has reached the client and the request's deadline allows. A streamed error answer is read
// whole so that it can be retried like a buffered one. Admission (--max-concurrent-requests,
// --queue-size, --queue-timeout-secs, --rate-limit-tokens-per-second) runs before the pick on
// atomics; only a request that must queue allocates.
//
// # In-flight accounting
//
// The worker's InFlight count rises once at dispatch and falls exactly once: for a buffered
// answer when the upstream round trip returns (success or error), for a relayed one when
// fasthttp closes the relay's body stream, which it does when the body is written, when the
// write fails, and when the response is reset without being written. A deferred guard covers
// panics between dispatch and hand-off.
//
// # Errors
//
// Gateway-made errors on the OpenAI routes use the OpenAI envelope
// {"error":{"message","type","code","param"}} with an X-SMG-Error-Code header, mapped from
// the cause in one place (errors.go). The worker API answers {"error","code"} like the spec
// product.
package fastpath
