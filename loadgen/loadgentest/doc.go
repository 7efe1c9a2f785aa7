// Package loadgentest is a small fake OpenAI-compatible engine for testing and
// benchmarking the load generator: chat completions, completions and SGLang's /generate,
// streamed as server-sent events or whole, with a configurable delay per token, a
// word-block prefix cache that reports cached_tokens, and fault injection.
//
// It mimics the shapes the project's mock engine speaks (chat.completion(.chunk) with
// delta.content, text_completion, /generate with cumulative "text", streams ending in
// "data: [DONE]") without depending on it, so loadgen's tests do not move when the mock does.
//
// Concurrency: a Server handles requests concurrently (one fasthttp goroutine per
// connection); its counters are atomic and its prefix cache is guarded by a mutex. Options
// are read-only once Start returns. Record hooks are called concurrently.
//
// Buffers: the request passed to Record is only valid during the call.
package loadgentest
