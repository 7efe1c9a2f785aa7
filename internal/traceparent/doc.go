// Package traceparent reads and writes the W3C Trace Context traceparent header and makes
// the sampling decision of a trace, without allocating: the data plane runs it for every
// request while tracing is on.
//
// # Contract
//
//   - Parse accepts exactly the headers W3C Trace Context (level 1) lets a receiver use:
//     version 00 is 55 characters "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>",
//     lowercase hex only, neither id all zeros; a later version (not ff) is read by the same
//     prefix, and may carry more after a '-'. Anything else is invalid, and the caller starts
//     a new trace.
//   - Append writes version 00; Parse(Append(c)) == c for every valid c (fuzzed).
//   - Sampling by ratio is deterministic on the trace id, as OpenTelemetry's
//     TraceIDRatioBased sampler decides, so every gateway (and any SDK) keeps the same traces.
//   - New ids come from the runtime's per-thread generator (math/rand/v2): no lock, no
//     allocation, never all zeros.
package traceparent
