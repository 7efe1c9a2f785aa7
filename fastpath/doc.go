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
