// Package http1 frames HTTP/1.1 requests without allocating: the request line, the header
// block and the body (Content-Length or chunked) of one request at the start of a buffer,
// recorded as offsets into it. It is the one request parser of the gateway's event loops
// (fastpath/evloop) and of the mock engines' gnet server (mockworker), which may not import
// each other (the mock is a black-box oracle of the gateway's behaviour).
//
// # What it accepts
//
// RFC 9112's syntax, strictly where a lenient parser would let a request be read two ways:
// a method and header names made of token characters (no whitespace before a colon), no
// control characters in header values, one Content-Length (repeats must agree),
// Transfer-Encoding chunked only and never with a Content-Length (RFC 9112 §6.3: 400, not
// "chunked wins"), at most one Host line (MissingHost reports an HTTP/1.1 request without
// one, which the gateway refuses), lines ended by CRLF (a bare LF is refused as soon as it
// arrives, not when the head would end), HTTP/1.0 and HTTP/1.1, the origin and absolute
// forms of the target. At most MaxHeaders (256) header lines are indexed;
// a request with more is refused (431, ErrTooManyHeaders), and so is one whose head passes the
// caller's limit in bytes (ErrHeaderTooLarge): the two errors say which limit was hit.
//
// # Buffers
//
// A Request holds offsets (Span) into the buffer it was parsed from, and views through its
// methods that are valid while that buffer is. A chunked body is decoded into the caller's
// scratch buffer, reused from request to request. Nothing here allocates (tested with
// testing.AllocsPerRun); errors are preallocated *Error values carrying the status to answer.
package http1
