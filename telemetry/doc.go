// Package telemetry turns finished requests into what operators read: per-model LLM metrics
// (time to first token, inter-token latency, token counts), the access log and, when enabled,
// OpenTelemetry spans.
//
// The data plane fills one Record per request from values it already holds (timestamps on its
// own clock, the status, the picked worker, token counts) and hands it over when the request
// ends; everything that formats, aggregates or exports runs here, off the event loops.
package telemetry
