// Package trace exports the OpenTelemetry spans of finished requests over OTLP/gRPC
// (--enable-trace, --otlp-traces-endpoint).
//
// The data plane decides a request's trace context as it arrives (fastpath: the client's
// W3C traceparent or a new trace, the sampled flag, a span id of the gateway's own, sent to
// the workers as their parent) and records its timestamps; nothing here runs on the event
// loops. Tracer.Export turns a finished telemetry.Record into spans after the fact, with
// the record's own ids and times:
//
//	smg.request      Start → End        model, route, status, worker, attempts, tokens, error
//	├─ smg.admission Start → Admitted   the wait in the admission queue
//	├─ smg.pick      Admitted → Picked  the worker picked
//	└─ event first_token at FirstToken
//
// so the span the workers saw as their parent is the one exported. Spans are batched and
// sent by the OpenTelemetry SDK's batch processor on its own goroutine; when the collector
// is slow or away, spans past the queue are dropped, never the requests.
package trace
