package mockworker

import "github.com/smg-go/smg/internal/http1"

// httpRequest is one HTTP/1.1 request parsed by parseHTTPRequest: views into the read buffer
// (body may instead alias the chunked-body scratch), valid until that buffer is discarded.
type httpRequest struct {
	method    []byte
	path      []byte // request target without the query string
	body      []byte
	requestID []byte
	fault     []byte
	trace     []byte
	// keepAlive is false after "Connection: close" or an HTTP/1.0 request without
	// "Connection: keep-alive".
	keepAlive bool
	// expectContinue: the client sent "Expect: 100-continue" and waits for it before the body.
	expectContinue bool
	// need is the whole request's size once its head is parsed and names a Content-Length,
	// 0 otherwise (a chunked body's end is found by parsing).
	need int
}

// Limits of the gnet server's parser; a request beyond them is refused and the connection closed.
const (
	maxHeaderBytes = 64 << 10
	maxBodyBytes   = 64 << 20
)

// parseHTTPRequest parses the first request in buf with internal/http1 (the gateway's event
// loops parse with the same code). It returns the number of bytes the request occupies, or 0
// and no error when buf holds only part of it; a refused request is an *http1.Error with the
// status to answer. A chunked body is decoded into *chunkScratch. On an incomplete request
// whose headers are complete, req.expectContinue tells whether the client waits for
// "100 Continue".
func parseHTTPRequest(buf []byte, req *httpRequest, chunkScratch *[]byte) (int, error) {
	var r http1.Request
	n, err := http1.ParseRequest(buf, &r, chunkScratch, maxHeaderBytes, maxBodyBytes)
	*req = httpRequest{
		method: r.Method(), path: r.Path(), body: r.Body(),
		requestID: r.Header(headerRequestID), fault: r.Header(faultHeader), trace: r.Header(headerTraceparent),
		keepAlive: r.KeepAlive(), expectContinue: r.ExpectContinue(), need: r.Need(),
	}
	return n, err
}
