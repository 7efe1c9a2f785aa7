// Package disagg rewrites request and response bodies for prefill-decode (PD)
// disaggregation: the members SGLang's bootstrap protocol and vLLM's KV-transfer protocol
// need the gateway to add to the client's JSON body (spec: PD disaggregation).
//
//   - SGLang: both legs get the client's body plus bootstrap_host, bootstrap_port and
//     bootstrap_room (AppendBootstrap, NewRoom): the prefill server's bootstrap address and
//     a random room that pairs the prefill and the decode of one request.
//   - vLLM: the prefill leg gets kv_transfer_params asking for a remote decode, stream
//     false and one output token (AppendVLLMPrefill); its response carries the
//     kv_transfer_params the decode leg needs (KVTransferParams), which are set on the
//     client's body for the decode leg (AppendVLLMDecode).
//
// EPD (epd.go) adds the encode leg's bodies: SGLang's encode worker gets the bootstrap
// fields of its own room (AppendBootstrap) and the PD legs encode_bootstrap_host, _port and
// _room (AppendEncodeHandshake); vLLM's gets the body unstreamed with one token
// (AppendVLLMEncode). Multimodal says whether a body carries media for an encoder at all.
//
// All of them are Rewrite with fixed members: copy every top-level member of the body
// except those named in the set, then append the set's members before the closing brace.
//
// # Why members are removed, not shadowed
//
// Appending "stream":false after a client's "stream":true would be shorter, but it relies
// on the receiver taking the last of duplicate names. RFC 8259 §4 leaves duplicates'
// meaning undefined: Python's json and Go's encoding/json take the last, but serde's derived
// struct deserializers (Rust, as in SGLang's own gateway) reject the body with "duplicate
// field", and simdjson's on-demand lookup takes the first. A body with one member of each name
// means the same to every parser, so the rewrite removes the members it replaces.
//
// Names are compared after JSON unescaping, as encoding/json decodes names into a map, so
// that "stre\u0061m" is replaced too: raw-byte comparison would leave exactly the duplicate
// the removal is meant to prevent. Only top-level members are considered; members of the
// same names inside nested objects (a message, a tool's parameters schema) are copied
// untouched.
//
// # Validation
//
// The body is walked once and validated as strictly as encoding/json does (syntax, control
// characters and escapes in strings, nesting up to MaxDepth; the scanning is
// internal/jsonscan's, the same as fastpath/extract's), so the output is well-formed
// JSON whenever the call succeeds; like fastpath/extract, invalid UTF-8 is passed through
// as sent. Anything that is not one well-formed JSON object is ErrInvalidBody, never a
// panic (fuzzed). Whitespace between members is dropped; every member's name and value
// bytes are copied as sent.
//
// # Concurrency and buffer ownership
//
// Every function is pure and safe on any number of goroutines. The Append functions and
// Rewrite append to dst, which the gateway takes from a pool, and never write to body; dst
// must not overlap the input. With enough capacity in dst they allocate nothing (tested
// with testing.AllocsPerRun): the scanner's nesting stack is a bitset on the stack, and
// errors are preallocated sentinels. KVTransferParams returns a view into the response,
// valid while the response buffer is.
package disagg
