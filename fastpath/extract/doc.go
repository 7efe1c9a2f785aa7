// Package extract reads, in one pass over a request body, the fields the gateway routes
// on: "model", "stream", "rid" and the routing text or token IDs (docs/architecture.md).
// It is a purpose-built JSON scanner that validates the whole body as strictly as
// encoding/json, allocates nothing in steady state, and leaves the body untouched so the
// gateway can forward the original bytes. docs/benchmarks-extract.md compares it with
// valyala/fastjson.
//
// # What is extracted
//
// Members are matched at the top level of the body only (and, for chat, inside messages
// and their content parts), by exact name after JSON decoding, as encoding/json does when
// decoding into a map. Every other value is skipped but still validated. When a name
// repeats, the last occurrence wins, as in encoding/json: a well-typed duplicate also
// replaces an earlier mistyped one. null means absent everywhere.
//
//   - model: a string (Fields.Model, Fields.HasModel).
//   - stream: a boolean; absent or null is false.
//   - rid: a string, or the first of an array of strings (SGLang's batch form: the batch
//     goes to one worker, keyed by its first request). Empty means absent.
//
// The routing text (Fields.Text) follows the SGLang Model Gateway's
// extract_text_for_routing, so that both build the same prefix trees from the same
// traffic:
//
//   - /v1/chat/completions: for every message in order, its "content" (a string, or the
//     "text" of each content part whose "type" is "text"; other parts such as images add
//     nothing), then, for an assistant message, its "reasoning_content". The non-empty
//     pieces are joined with one space. The gateway joins with a space; we keep it rather
//     than "\n" or nothing, because a different separator would route differently from it.
//     Joining keeps multi-turn requests prefix-stable: a follow-up's text starts with the
//     text of the turn before it, which is what cache-aware routing keys on.
//   - /v1/completions: "prompt" as a string; an array of strings joined with one space,
//     as the gateway joins them; an array of token IDs into Fields.InputIDs; or an array
//     of token-ID arrays, of which the first goes to InputIDs (the batch is routed by its
//     first sequence, as the gateway does for /generate).
//   - /generate: "text" as a string or the first of an array of strings into Text, and
//     "input_ids" as token IDs, or the first of a batch of token-ID arrays, into InputIDs.
//     Both are extracted when both are present; the gateway prefers non-empty token IDs
//     (its routing_tokens), and leaves rejecting the combination to the worker.
//
// The engine pass-through routes take their routing text from the member that carries the
// prompt, so that cache_aware and prefix_hash work on them too:
//
//   - /v1/embeddings and /v1/classify: "input", by the completions "prompt" rules.
//   - /v1/tokenize: "prompt", by the same rules.
//   - /v1/rerank (and /rerank): "query", a string.
//   - /v1/detokenize: "tokens", token IDs into InputIDs, by the /generate "input_ids" rules.
//   - /v1/responses: "input", a string, or input items read like chat messages, whose
//     content parts of type "input_text", "output_text" or "text" contribute ("instructions"
//     is not routing text).
//   - /v1/messages (Anthropic): "system", a string or text blocks, then "messages" by the
//     chat rules, joined with one space, the system text first whatever the member order.
//
// Token IDs are JSON integers from 0 to 4294967295 written without fraction or exponent.
// Extract checks types only where routing reads a value; it does not require any member,
// since the worker validates the request it serves.
//
// Text from reasoning_content and from a part's "type" and "text" is read leniently where
// the gateway would ignore it: a non-string role or reasoning_content adds nothing and is
// not an error. A text part without a string "text" is an error.
//
// # Strings, views and UTF-8
//
// Escapes are decoded exactly as encoding/json decodes them: a valid surrogate pair of \u
// escapes becomes one rune, and any other escaped surrogate becomes U+FFFD. A string
// without escapes is returned as a view into the body; one with escapes is decoded into a
// buffer the Fields owns. The chat text is always built in a Fields buffer, and so is a
// completions prompt given as an array of strings.
//
// Invalid UTF-8 is passed through as sent, where encoding/json replaces each invalid byte
// with U+FFFD. Validating it took 42% more instructions on the multi-turn chat benchmark
// body, which has some non-ASCII text (docs/benchmarks-extract.md), and nothing routing
// does depends on it: bytes key the prefix trees and hashes, and code that counts
// characters with unicode/utf8 sees one U+FFFD per invalid byte either way. The
// differential tests compare against encoding/json after that replacement; everything
// else, acceptance included, is the same.
//
// # Errors
//
// Extract returns a *SyntaxError (wrapping ErrInvalidJSON) when the body is not one
// well-formed JSON object: trailing data, a trailing comma, a control character in a
// string, nesting deeper than MaxDepth, and so on, reporting the byte offset and what was
// expected there, for example
//
//	invalid JSON at byte 57: expected ',' or '}' after the member value, found 'x'
//
// Syntax errors anywhere take precedence. Otherwise a *FieldError (wrapping ErrFieldType)
// names the first mistyped routing field, for example `"stream" must be a boolean` or
// `"messages[2].content" must be a string, an array of content parts, or null`. Both
// messages are written for the client's 400 response. Errors allocate; success does not.
//
// # Concurrency and buffer ownership
//
// Extract is a pure function of its arguments and may run on any number of goroutines at
// once, each with its own *Fields. A Fields belongs to one request at a time; the gateway
// pools them. Its byte slices alias the body or its own buffers (see Fields) and are
// valid until the next Extract or Reset on it, and the aliases only while the body is
// unchanged: copy what must outlive the request. Extract never writes to the body. The
// buffers keep their capacity across requests, which is what makes steady state
// allocation-free; the pool owner may drop a Fields whose buffers grew very large.
//
// The scanner walks the known structure with a few levels of plain calls and skips every
// other value iteratively with a one-bit-per-level stack in the Fields, so hostile input
// costs neither recursion nor allocation. The JSON grammar itself (whitespace, literals,
// numbers, strings and their escapes, skipping values) is internal/jsonscan's, shared with
// fastpath/disagg; this package adds the field logic and words jsonscan's failures as the
// client's error messages. Short strings take one 16-byte SWAR step; long
// ones are searched with bytes.IndexByte (vectorised in the runtime) for the closing quote
// and the escapes, and checked for control characters eight bytes at a time.
package extract
