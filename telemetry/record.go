package telemetry

import "github.com/smg-go/smg/worker"

// Record is what the data plane knows about one request when it ends. It holds no pointer
// into a request buffer: the data plane copies what it keeps, so a Record outlives the
// request. Times are nanoseconds on the data plane's monotonic clock (internal/clock); 0
// means the step did not happen.
type Record struct {
	// RequestID is the client's X-Request-Id (or the id the gateway gave the request).
	RequestID [64]byte
	IDLen     uint8
	// Model is the model the request was routed for ("" when it failed before routing).
	Model string
	// Route is the request's path as the metrics name it (for example "/v1/chat/completions").
	Route string
	// Worker is the worker of the last attempt (nil when none was picked).
	Worker *worker.Worker
	// Status is the HTTP status the client received.
	Status int
	// ErrorCode is the X-SMG-Error-Code of an error answer the gateway made ("" on success
	// and on a worker's own error answer).
	ErrorCode string
	// Cause says why the request failed, in the words of the gateway's error message (""
	// on success and on a worker's own error answer).
	Cause string
	// GRPC reports a request served by gRPC workers (the gateway tokenized it); PD one served
	// by a prefill and a decode worker.
	GRPC, PD bool
	// Stream reports a streamed (SSE) answer.
	Stream bool
	// Attempts counts the tries; Attempts-1 were retried.
	Attempts uint8

	Start      int64 // the request was read
	Admitted   int64 // it left the admission queue (== Start when it did not wait)
	Picked     int64 // the first worker was picked
	FirstToken int64 // the first byte of the answer's body (first token of a stream) reached the client
	End        int64 // the answer's last byte was written, or the client went away

	// Tokens from the engine's usage or, on the gRPC path, counted by the gateway; -1 unknown.
	PromptTokens, CompletionTokens, CachedTokens int32

	// Trace context (W3C): the trace the request belongs to, the span the gateway created
	// for it, the client's parent span, and whether the trace is sampled. Zero when tracing
	// is off.
	TraceID      [16]byte
	SpanID       [8]byte
	ParentSpanID [8]byte
	Sampled      bool
}

// ID returns the request id as a string.
func (r *Record) ID() string { return string(r.RequestID[:r.IDLen]) }
