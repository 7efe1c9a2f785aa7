package grpcworker

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors of the client itself. Each has a Class (see Classify).
var (
	// ErrClosed: the Client was closed (the worker was removed). Class Unavailable.
	ErrClosed = errors.New("grpc worker client is closed")
	// ErrConnect: Dial could not bring a connection up. Class Unavailable.
	ErrConnect = errors.New("cannot connect to grpc worker")
	// ErrStreamLimit: Config.MaxStreams Generate streams are open already. Class Backpressure.
	ErrStreamLimit = errors.New("grpc worker stream limit reached")
	// ErrUnsupported: the dialect has no such RPC (vLLM has no FlushCache). Class Unsupported.
	ErrUnsupported = errors.New("not supported by this engine")
	// ErrUnhealthy: HealthCheck answered healthy=false. Class Unavailable.
	ErrUnhealthy = errors.New("grpc worker reports unhealthy")
	// ErrTruncated: a Generate stream ended without a GenerateComplete for every sample.
	// Class Internal.
	ErrTruncated = errors.New("grpc worker ended the stream before every sample completed")
	// ErrBadResponse: the engine sent a message the client cannot use (an empty oneof, a
	// sample index out of range). Class Internal.
	ErrBadResponse = errors.New("grpc worker sent an invalid response")
	// ErrBadRequest: the GenerateRequest cannot be sent as is (no request id, no input).
	// Class ClientError.
	ErrBadRequest = errors.New("invalid generate request")
)

// Class is what the gateway does with an error of the engine client.
type Class uint8

// The classes. The table in doc.go gives the gRPC codes of each.
const (
	// OK: no error.
	OK Class = iota
	// Unavailable: the worker cannot be reached or refuses work for now (UNAVAILABLE, a
	// failed connection, a closed client). Retry on another worker; a breaker fault. 503.
	Unavailable
	// Backpressure: the worker is full (RESOURCE_EXHAUSTED, ErrStreamLimit). Retry on another
	// worker; not a fault (a busy worker is healthy). 429.
	Backpressure
	// ClientError: the engine refused the request itself (INVALID_ARGUMENT, OUT_OF_RANGE,
	// FAILED_PRECONDITION, NOT_FOUND, ALREADY_EXISTS); another worker would refuse it too.
	// 400 with the engine's message (Message).
	ClientError
	// Canceled: the caller canceled (CANCELED, context.Canceled). 499; nothing to retry.
	Canceled
	// Timeout: a deadline passed (DEADLINE_EXCEEDED, context.DeadlineExceeded). 504; a fault.
	Timeout
	// Unsupported: the engine lacks the method (UNIMPLEMENTED, ErrUnsupported). 501.
	Unsupported
	// Internal: anything else (INTERNAL, UNKNOWN, DATA_LOSS, ABORTED, a truncated or invalid
	// stream). 502; a fault.
	Internal
)

var classNames = [...]string{"ok", "unavailable", "backpressure", "client_error", "canceled", "timeout", "unsupported", "internal"}

// String returns the class's snake_case name (for metrics labels and logs).
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// HTTPStatus is the status the gateway answers with: 503, 429, 400, 499, 504, 501, 502
// (200 for OK).
func (c Class) HTTPStatus() int {
	switch c {
	case OK:
		return http.StatusOK
	case Unavailable:
		return http.StatusServiceUnavailable
	case Backpressure:
		return http.StatusTooManyRequests
	case ClientError:
		return http.StatusBadRequest
	case Canceled:
		return 499 // nginx's "client closed request"; no net/http constant
	case Timeout:
		return http.StatusGatewayTimeout
	case Unsupported:
		return http.StatusNotImplemented
	}
	return http.StatusBadGateway
}

// Retryable reports whether another worker may succeed where this one failed; the gateway
// retries only before the first token reached the client.
func (c Class) Retryable() bool { return c == Unavailable || c == Backpressure }

// Fault reports whether the error counts against the worker's circuit breaker.
func (c Class) Fault() bool { return c == Unavailable || c == Timeout || c == Internal }

// Classify maps an error of this package (or any error carrying a gRPC status) to its Class.
// nil is OK. Context errors win over the status they caused, so a canceled request is
// Canceled however grpc-go reported it.
func Classify(err error) Class {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, ErrClosed), errors.Is(err, ErrConnect), errors.Is(err, ErrUnhealthy):
		return Unavailable
	case errors.Is(err, ErrStreamLimit):
		return Backpressure
	case errors.Is(err, ErrUnsupported):
		return Unsupported
	case errors.Is(err, ErrBadRequest):
		return ClientError
	case errors.Is(err, ErrTruncated), errors.Is(err, ErrBadResponse):
		return Internal
	}
	s, ok := status.FromError(err)
	if !ok {
		return Internal
	}
	return classOfCode(s.Code())
}

func classOfCode(c codes.Code) Class {
	switch c {
	case codes.OK:
		return OK
	case codes.Unavailable:
		return Unavailable
	case codes.ResourceExhausted:
		return Backpressure
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition, codes.NotFound, codes.AlreadyExists:
		return ClientError
	case codes.Canceled:
		return Canceled
	case codes.DeadlineExceeded:
		return Timeout
	case codes.Unimplemented:
		return Unsupported
	}
	return Internal // Unknown, Internal, DataLoss, Aborted, PermissionDenied, Unauthenticated
}

// Message returns the text a client may see: the engine's own status message for a gRPC
// status (what SGLang or vLLM said was wrong with the request), else err's text.
func Message(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := status.FromError(err); ok && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return s.Message()
	}
	return err.Error()
}
