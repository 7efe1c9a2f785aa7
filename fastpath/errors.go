package fastpath

import (
	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/jsonx"
)

// apiError is a gateway-made error on the OpenAI routes: the status and the OpenAI envelope's
// type and code. The message is given where the error is raised.
type apiError struct {
	status int
	typ    string
	code   string
}

// The gateway's errors, one table: what each cause answers.
var (
	errInvalidRequest  = apiError{fasthttp.StatusBadRequest, "invalid_request_error", "invalid_request"}
	errPayloadTooLarge = apiError{fasthttp.StatusRequestEntityTooLarge, "invalid_request_error", "payload_too_large"}
	errHeaderTooLarge  = apiError{fasthttp.StatusRequestHeaderFieldsTooLarge, "invalid_request_error", "header_too_large"}
	errReadTimeout     = apiError{fasthttp.StatusRequestTimeout, "invalid_request_error", "request_timeout"}
	errBodyMemory      = apiError{fasthttp.StatusServiceUnavailable, "service_unavailable", "request_body_memory_exhausted"}
	errModelNotFound   = apiError{fasthttp.StatusNotFound, "invalid_request_error", "model_not_found"}
	errNotFound        = apiError{fasthttp.StatusNotFound, "invalid_request_error", "not_found"}
	errMethod          = apiError{fasthttp.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed"}
	errNoWorkers       = apiError{fasthttp.StatusServiceUnavailable, "service_unavailable", "no_available_workers"}
	errTargetWorker    = apiError{fasthttp.StatusServiceUnavailable, "service_unavailable", "invalid_target_worker"}
	errPassThroughPD   = apiError{fasthttp.StatusNotImplemented, "invalid_request_error", "unsupported_in_pd_mode"}
	// The spec product answers 500 for an unreachable worker; 502 is what HTTP means.
	errUpstreamUnreachable = apiError{fasthttp.StatusBadGateway, "server_error", "worker_unreachable"}
	errUpstreamTimeout     = apiError{fasthttp.StatusGatewayTimeout, "server_error", "worker_timeout"}
	errAnswerTooLarge      = apiError{fasthttp.StatusBadGateway, "server_error", "worker_answer_too_large"}
	// errStreamFailed is the error event ending a relayed stream the worker broke off
	// (streamFailureEvent): the client had its 200 already.
	errStreamFailed = apiError{fasthttp.StatusBadGateway, "server_error", "worker_stream_failed"}
	errAnswerMemory = apiError{fasthttp.StatusServiceUnavailable, "service_unavailable", "answer_memory_exhausted"}
	errLoop         = apiError{fasthttp.StatusLoopDetected, "invalid_request_error", "forwarding_loop"}
	errInternal     = apiError{fasthttp.StatusInternalServerError, "server_error", "internal_error"}
)

const headerErrorCode = "X-SMG-Error-Code"

// writeError answers the client with e in the OpenAI envelope. It replaces any response the
// exchange had started.
func writeError(ctx *fasthttp.RequestCtx, e apiError, message string) {
	resp := &ctx.Response
	resp.Reset()
	resp.SetStatusCode(e.status)
	resp.Header.SetContentType("application/json")
	resp.Header.Set(headerErrorCode, e.code)
	resp.SetBodyRaw(appendErrorBody(make([]byte, 0, 96+len(message)), e, message))
}

// appendErrorBody appends e's OpenAI envelope with message to dst.
func appendErrorBody(dst []byte, e apiError, message string) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = jsonx.AppendString(dst, message)
	dst = append(dst, `,"type":"`...)
	dst = append(dst, e.typ...)
	dst = append(dst, `","code":"`...)
	dst = append(dst, e.code...)
	return append(dst, `","param":null}}`...)
}
