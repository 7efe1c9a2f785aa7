package evloop

import "github.com/smg-go/smg/internal/http1"

// Request is one parsed HTTP/1.1 request (internal/http1, the parser shared with the mock
// engines): views into the connection's read buffer (the body may instead be the decoded
// chunked body), valid until the exchange ends.
type Request = http1.Request

// ParseError is a request the server refuses: Status is the HTTP status to answer with (400,
// 408, 413, 431, 501, 503), after which the connection is closed.
type ParseError = http1.Error

// errBodyMemory refuses a request whose buffer cannot grow within Config.Reserve's budget.
var errBodyMemory = &ParseError{Status: 503, Reason: "request body memory exhausted"}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)
