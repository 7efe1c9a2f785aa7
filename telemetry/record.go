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
	// Tries are the first MaxTries tries, in order (Attempts of them when Attempts <=
	// MaxTries).
	Tries [MaxTries]Try
	// RetriesExhausted reports a request whose last try failed with every retry used: its
	// client got the last failure (retries enabled).
	RetriesExhausted bool
	// Policy names the policy that picked the first worker ("" when none was picked).
	Policy string
	// CacheMatched is the longest cached prefix the first pick's policy found for the
	// request, CacheInput the request's length, in the policy's units (characters of the
	// text tree, tokens of the token tree or the engines' KV events); 0 when the policy
	// does not match prefixes.
	CacheMatched, CacheInput int32

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

// MaxTries is how many tries of a request a Record describes one by one.
const MaxTries = 8

// Try is one try of a request on its answering worker (the decode worker in PD mode).
type Try struct {
	// Worker is the worker the try was sent to.
	Worker *worker.Worker
	// Sent is when the request left for the worker; Ended when the try ended (the record's
	// End for its last try).
	Sent, Ended int64
	// Backoff is the pause (ns) taken after this try before the next one was picked.
	Backoff int64
	// Status is the worker's answer status; 0 when it gave none (Failure says why).
	Status int16
	// Failure classes a try that failed without an answer.
	Failure TryFailure
}

// TryFailure classes a try that ended without an answer from its worker.
type TryFailure uint8

// The try failures.
const (
	TryAnswered    TryFailure = iota // the worker answered (Try.Status)
	TryUnreachable                   // connection refused or reset, or the worker broke off
	TryTimeout                       // no answer within the try's deadline
)

// String names f as the spans' error.type does.
func (f TryFailure) String() string {
	switch f {
	case TryUnreachable:
		return "unreachable"
	case TryTimeout:
		return "timeout"
	}
	return ""
}
