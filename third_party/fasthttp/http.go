package fasthttp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"
)

var (
	requestBodyPoolSizeLimit  int64 = -1
	responseBodyPoolSizeLimit int64 = -1
)

// SetBodySizePoolLimit set the max body size for bodies to be returned to the pool.
// If the body size is larger it will be released instead of put back into the pool for reuse.
func SetBodySizePoolLimit(reqBodyLimit, respBodyLimit int) {
	atomic.StoreInt64(&requestBodyPoolSizeLimit, int64(reqBodyLimit))
	atomic.StoreInt64(&responseBodyPoolSizeLimit, int64(respBodyLimit))
}

// Request represents HTTP request.
//
// It is forbidden copying Request instances. Create new instances
// and use CopyTo instead.
//
// Request instance MUST NOT be used from concurrently running goroutines.
type Request struct {
	noCopy noCopy

	bodyStream       io.Reader
	bodyStreamWriter *fixedSizeBodyWriter
	w                requestBodyWriter
	body             *bytebufferpool.ByteBuffer

	// serverStream is the request stream the server drains and releases
	// after the handler returns. Its prefetched bytes live in body, so body
	// must stay out of the pool until then, whether or not the stream is
	// still installed as bodyStream.
	serverStream *requestStream

	multipartForm         *multipart.Form
	multipartFormBoundary string

	postArgs   Args
	userValues userData

	bodyRaw []byte

	logger Logger

	uri URI

	// Request header.
	//
	// Copying Header by value is forbidden. Use pointer to Header instead.
	Header RequestHeader

	// Request timeout. Usually set by DoDeadline or DoTimeout
	// if <= 0, means not set
	timeout time.Duration

	secureErrorLogMessage bool

	// Group bool members in order to reduce Request object size.
	parsedURI      bool
	parsedPostArgs bool
	uriParseErr    error

	// KeepBodyBuffer controls whether the request body buffer is kept
	// across Reset() and ResetBody() calls instead of returning it to requestBodyPool.
	//
	// It is false by default. Set it to true if you want to reuse the same
	// Request instance across multiple requests, reusing the existing body
	// buffer when its capacity is sufficient (growing the body beyond capacity
	// can still allocate).
	//
	// KeepBodyBuffer adheres to the following contract:
	//   - Reset and ResetBody clear the contents but preserve the buffer and the flag.
	//   - KeepBodyBuffer bypasses SetBodySizePoolLimit, so a large buffer can stay attached
	//     until explicitly released (e.g. via ReleaseBody or ReleaseRequest).
	//   - CopyTo leaves the destination's KeepBodyBuffer setting unchanged.
	//   - ReleaseRequest clears the setting and releases the buffer to the pool.
	//   - Server contexts clear the public setting between requests.
	//   - PipelineClient.DoTimeout and DoDeadline may copy body data to preserve
	//     caller ownership across timeouts, so enabling this isn't necessarily
	//     faster for those methods.
	KeepBodyBuffer bool
	keepBodyBuffer bool

	// Used by byte-returning client helpers so body limits and retries remain
	// inside the normal buffered request path. This is deliberately not copied
	// by Request.CopyTo; it is scoped to the helper's synchronous Do call.
	forceResponseBodyBuffering bool

	// Used by Server to indicate the request was received on a HTTPS endpoint.
	// Client/HostClient shouldn't use this field but should depend on the uri.scheme instead.
	isTLS bool

	// Use Host header (request.Header.SetHost) instead of the host from SetRequestURI, SetHost, or URI().SetHost
	UseHostHeader bool

	// DisableRedirectPathNormalizing disables redirect path normalization when used with DoRedirects.
	//
	// By default redirect path values are normalized, i.e.
	// extra slashes are removed, special characters are encoded.
	DisableRedirectPathNormalizing bool
}

// Response represents HTTP response.
//
// It is forbidden copying Response instances. Create new instances
// and use CopyTo instead.
//
// Response instance MUST NOT be used from concurrently running goroutines.
type Response struct {
	noCopy noCopy

	bodyStream       io.Reader
	bodyStreamWriter *fixedSizeBodyWriter

	// Remote TCPAddr from concurrently net.Conn.
	raddr net.Addr
	// Local TCPAddr from concurrently net.Conn.
	laddr net.Addr
	w     responseBodyWriter
	body  *bytebufferpool.ByteBuffer

	bodyRaw []byte

	// vec backs the header and body pair handed to writev, inline so that
	// forming it costs no allocation; bufs is the slice WriteTo consumes.
	vec  [2][]byte
	bufs net.Buffers

	// Response header.
	//
	// Copying Header by value is forbidden. Use pointer to Header instead.
	Header ResponseHeader

	// Flush headers as soon as possible without waiting for first body bytes.
	// Relevant for bodyStream only.
	ImmediateHeaderFlush bool

	// StreamBody enables response body streaming while reading a response.
	// Body read errors are returned by BodyStream reads or BodyWriteTo after
	// Read or a client Do method has returned. Errors that occur after a client
	// Do method returns aren't handled by that client's retry callbacks.
	// Use SetBodyStream to set the body stream when writing a response.
	StreamBody bool

	// Response.Read() skips reading body if set to true.
	// Use it for reading HEAD responses.
	//
	// Response.Write() skips writing body if set to true.
	// Use it for writing HEAD responses.
	SkipBody bool

	// KeepBodyBuffer controls whether the response body buffer is kept
	// across Reset() and ResetBody() calls instead of returning it to responseBodyPool.
	//
	// It is false by default. Set it to true if you want to reuse the same
	// Response instance across multiple requests, reusing the existing body
	// buffer when its capacity is sufficient (growing the body beyond capacity
	// can still allocate).
	//
	// KeepBodyBuffer adheres to the following contract:
	//   - Reset and ResetBody clear the contents but preserve the buffer and the flag.
	//   - KeepBodyBuffer bypasses SetBodySizePoolLimit, so a large buffer can stay attached
	//     until explicitly released (e.g. via ReleaseBody or ReleaseResponse).
	//   - CopyTo leaves the destination's KeepBodyBuffer setting unchanged.
	//   - ReleaseResponse clears the setting and releases the buffer to the pool.
	//   - Server contexts clear the public setting between requests.
	//   - PipelineClient.DoTimeout and DoDeadline may copy body data to preserve
	//     caller ownership across timeouts, so enabling this isn't necessarily
	//     faster for those methods.
	KeepBodyBuffer bool
	keepBodyBuffer bool

	preserveBodyBuffer    bool
	secureErrorLogMessage bool
}

// SetHost sets host for the request.
func (req *Request) SetHost(host string) {
	req.URI().SetHost(host)
}

// SetHostBytes sets host for the request.
func (req *Request) SetHostBytes(host []byte) {
	req.URI().SetHostBytes(host)
}

// Host returns the host for the given request.
func (req *Request) Host() []byte {
	return req.URI().Host()
}

// SetRequestURI sets RequestURI.
func (req *Request) SetRequestURI(requestURI string) {
	req.Header.SetRequestURI(requestURI)
	req.parsedURI = false
	req.uriParseErr = nil
}

// SetRequestURIBytes sets RequestURI.
func (req *Request) SetRequestURIBytes(requestURI []byte) {
	req.Header.SetRequestURIBytes(requestURI)
	req.parsedURI = false
	req.uriParseErr = nil
}

// RequestURI returns request's URI.
//
// If the request URI is absolute and contains a host, calling RequestURI after
// Host or URI may reset the parsed URI state and make a subsequent Host call
// return an empty value. Use req.URI().RequestURI() when the parsed URI and its
// host must remain available.
func (req *Request) RequestURI() []byte {
	if req.parsedURI {
		requestURI := req.requestURIFromURI()
		req.SetRequestURIBytes(requestURI)
	}
	return req.Header.RequestURI()
}

// requestURIFromURI returns the request target rebuilt from the parsed URI.
//
// The target of a CONNECT request names the authority to tunnel to rather
// than a path (RFC 9112, Section 3.2.3), so it is rebuilt without path
// normalization, which would turn the authority-form "example.com:443" into
// the origin-form "/example.com:443".
func (req *Request) requestURIFromURI() []byte {
	return req.uri.requestURIBytes(req.uri.DisablePathNormalizing || req.Header.IsConnect())
}

// StatusCode returns response status code.
func (resp *Response) StatusCode() int {
	return resp.Header.StatusCode()
}

// SetStatusCode sets response status code.
func (resp *Response) SetStatusCode(statusCode int) {
	resp.Header.SetStatusCode(statusCode)
}

// ConnectionClose returns true if 'Connection: close' header is set.
func (resp *Response) ConnectionClose() bool {
	return resp.Header.ConnectionClose()
}

// SetConnectionClose sets 'Connection: close' header.
func (resp *Response) SetConnectionClose() {
	resp.Header.SetConnectionClose()
}

// ConnectionClose returns true if 'Connection: close' header is set.
func (req *Request) ConnectionClose() bool {
	return req.Header.ConnectionClose()
}

// SetConnectionClose sets 'Connection: close' header.
func (req *Request) SetConnectionClose() {
	req.Header.SetConnectionClose()
}

// GetTimeOut retrieves the timeout duration set for the Request.
//
// This method returns a time.Duration that determines how long the request
// can wait before it times out. In the default use case, the timeout applies
// to the entire request lifecycle, including both receiving the response
// headers and the response body.
func (req *Request) GetTimeOut() time.Duration {
	return req.timeout
}

// SendFile registers file on the given path to be used as response body
// when Write is called.
//
// Note that SendFile doesn't set Content-Type, so set it yourself
// with Header.SetContentType.
func (resp *Response) SendFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	fileInfo, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	size64 := fileInfo.Size()
	size := int(size64)
	if int64(size) != size64 {
		size = -1
	}

	resp.Header.SetLastModified(fileInfo.ModTime())
	resp.SetBodyStream(f, size)
	return nil
}

// SetBodyStream sets request body stream and, optionally body size.
//
// If bodySize is >= 0, then the bodyStream must provide exactly bodySize bytes
// before returning io.EOF.
//
// If bodySize < 0, then bodyStream is read until io.EOF.
//
// When bodySize < 0 (chunked transfer encoding), fasthttp may frame the body
// using WriteTo instead of Read for *bytes.Reader, *bytes.Buffer, and streams
// implementing BodyWriterTo that return true from SupportsBodyWriteTo.
//
// See BodyWriterTo for controlling whether fasthttp may use WriteTo instead of
// Read when consuming bodyStream.
//
// bodyStream.Close() is called after finishing reading all body data
// if it implements io.Closer.
//
// Note that GET and HEAD requests cannot have body.
//
// See also SetBodyStreamWriter.
func (req *Request) SetBodyStream(bodyStream io.Reader, bodySize int) {
	req.ResetBody()
	req.bodyStream = bodyStream
	req.Header.SetContentLength(bodySize)
}

// SetBodyStream sets response body stream and, optionally body size.
//
// If bodySize is >= 0, then the bodyStream must provide exactly bodySize bytes
// before returning io.EOF.
//
// If bodySize < 0, then bodyStream is read until io.EOF.
//
// When bodySize < 0 (chunked transfer encoding), fasthttp may frame the body
// using WriteTo instead of Read for *bytes.Reader, *bytes.Buffer, and streams
// implementing BodyWriterTo that return true from SupportsBodyWriteTo.
//
// See BodyWriterTo for controlling whether fasthttp may use WriteTo instead of
// Read when consuming bodyStream.
//
// bodyStream.Close() is called after finishing reading all body data
// if it implements io.Closer.
//
// See also SetBodyStreamWriter.
func (resp *Response) SetBodyStream(bodyStream io.Reader, bodySize int) {
	resp.ResetBody()
	resp.bodyStream = bodyStream
	resp.Header.SetContentLength(bodySize)
}

// IsBodyStream returns true if body is set via SetBodyStream*.
func (req *Request) IsBodyStream() bool {
	return req.bodyStream != nil
}

// IsBodyStream returns true if body is set via SetBodyStream*.
func (resp *Response) IsBodyStream() bool {
	return resp.bodyStream != nil
}

// SetBodyStreamWriter registers the given sw for populating request body.
//
// This function may be used in the following cases:
//
//   - if request body is too big (more than 10MB).
//   - if request body is streamed from slow external sources.
//   - if request body must be streamed to the server in chunks
//     (aka `http client push` or `chunked transfer-encoding`).
//
// Note that GET and HEAD requests cannot have body.
//
// See also SetBodyStream.
func (req *Request) SetBodyStreamWriter(sw StreamWriter) {
	sr := NewStreamReader(sw)
	req.SetBodyStream(sr, -1)
}

// SetBodyStreamWriter registers the given sw for populating response body.
//
// This function may be used in the following cases:
//
//   - if response body is too big (more than 10MB).
//   - if response body is streamed from slow external sources.
//   - if response body must be streamed to the client in chunks
//     (aka `http server push` or `chunked transfer-encoding`).
//
// See also SetBodyStream.
func (resp *Response) SetBodyStreamWriter(sw StreamWriter) {
	sr := NewStreamReader(sw)
	resp.SetBodyStream(sr, -1)
}

// BodyWriter returns writer for populating response body.
//
// If used inside RequestHandler, the returned writer must not be used
// after returning from RequestHandler. Use RequestCtx.Write
// or SetBodyStreamWriter in this case.
func (resp *Response) BodyWriter() io.Writer {
	resp.w.r = resp
	return &resp.w
}

// BodyStream returns io.Reader.
//
// You must CloseBodyStream or ReleaseRequest after you use it.
func (req *Request) BodyStream() io.Reader {
	return req.bodyStream
}

func (req *Request) CloseBodyStream() error {
	return req.closeBodyStream()
}

// BodyStream returns the response body stream.
//
// When response streaming is enabled, the caller must close the stream with
// [Response.CloseBodyStream] after reading it.
//
// Streamed response bodies returned by [Client.Do] and [HostClient.Do] implement
// [ReadCloserWithError]. For these streams, report why a read stopped before EOF
// by asserting the returned reader to [ReadCloserWithError] and calling
// CloseWithError. See the example for retaining only a bounded body prefix.
func (resp *Response) BodyStream() io.Reader {
	return resp.bodyStream
}

func (resp *Response) CloseBodyStream() error {
	return resp.closeBodyStream(nil)
}

// ReadCloserWithError is a body stream that can be closed with the error that
// caused the caller to stop reading. Streamed response bodies returned by
// [Client.Do] and [HostClient.Do] implement this interface.
type ReadCloserWithError interface {
	io.Reader
	CloseWithError(err error) error
}

type closeReader struct {
	io.Reader

	closeFunc func(err error) error
}

func newCloseReaderWithError(r io.Reader, closeFunc func(err error) error) ReadCloserWithError {
	if r == nil {
		panic(`BUG: reader is nil`)
	}
	return &closeReader{Reader: r, closeFunc: closeFunc}
}

func (c *closeReader) CloseWithError(err error) error {
	if c.closeFunc == nil {
		return nil
	}
	return c.closeFunc(err)
}

// BodyWriter returns writer for populating request body.
func (req *Request) BodyWriter() io.Writer {
	req.w.r = req
	return &req.w
}

type responseBodyWriter struct {
	r *Response
}

func (w *responseBodyWriter) Write(p []byte) (int, error) {
	w.r.AppendBody(p)
	return len(p), nil
}

func (w *responseBodyWriter) WriteString(s string) (int, error) {
	w.r.AppendBodyString(s)
	return len(s), nil
}

type requestBodyWriter struct {
	r *Request
}

func (w *requestBodyWriter) Write(p []byte) (int, error) {
	w.r.AppendBody(p)
	return len(p), nil
}

func (w *requestBodyWriter) WriteString(s string) (int, error) {
	w.r.AppendBodyString(s)
	return len(s), nil
}

func (resp *Response) ParseNetConn(conn net.Conn) {
	resp.raddr = conn.RemoteAddr()
	resp.laddr = conn.LocalAddr()
}

// RemoteAddr returns the remote network address. The Addr returned is shared
// by all invocations of RemoteAddr, so do not modify it.
func (resp *Response) RemoteAddr() net.Addr {
	return resp.raddr
}

// LocalAddr returns the local network address. The Addr returned is shared
// by all invocations of LocalAddr, so do not modify it.
func (resp *Response) LocalAddr() net.Addr {
	return resp.laddr
}

// Body returns response body.
//
// The returned value is valid until the response is released,
// either though ReleaseResponse or your request handler returning.
// Do not store references to returned value. Make copies instead.
//
// If the body is backed by a stream, Body reads the entire stream into memory.
// Use BodyStream to read it incrementally.
// If reading the stream fails, Body returns the error message as the body.
// Use BodyStream or BodyWriteTo when the read error must be handled separately.
func (resp *Response) Body() []byte {
	if resp.bodyStream != nil {
		bodyBuf := resp.bodyBuffer()
		bodyBuf.Reset()
		_, err := copyBodyStream(bodyBuf, resp.bodyStream)
		resp.closeBodyStream(err) //nolint:errcheck
		if err != nil {
			bodyBuf.SetString(err.Error())
		}
	}
	return resp.bodyBytes()
}

func (resp *Response) bodyBytes() []byte {
	if resp.bodyRaw != nil {
		return resp.bodyRaw
	}
	if resp.body == nil {
		return nil
	}
	return resp.body.B
}

func (req *Request) bodyBytes() []byte {
	if req.bodyRaw != nil {
		return req.bodyRaw
	}
	if req.bodyStream != nil {
		bodyBuf := req.bodyBuffer()
		bodyBuf.Reset()
		_, err := copyBodyStream(bodyBuf, req.bodyStream)
		req.closeBodyStream() //nolint:errcheck
		if err != nil {
			bodyBuf.SetString(err.Error())
		}
	}
	if req.body == nil {
		return nil
	}
	return req.body.B
}

func (resp *Response) bodyBuffer() *bytebufferpool.ByteBuffer {
	if resp.body == nil {
		resp.body = responseBodyPool.Get()
	}
	resp.bodyRaw = nil
	return resp.body
}

func (req *Request) bodyBuffer() *bytebufferpool.ByteBuffer {
	if req.body == nil {
		req.body = requestBodyPool.Get()
	}
	req.bodyRaw = nil
	return req.body
}

var (
	responseBodyPool bytebufferpool.Pool
	requestBodyPool  bytebufferpool.Pool
)

// BodyGunzip returns un-gzipped body data.
//
// This method may be used if the request header contains
// 'Content-Encoding: gzip' for reading un-gzipped body.
// Use Body for reading gzipped request body.
func (req *Request) BodyGunzip() ([]byte, error) {
	return req.BodyGunzipWithLimit(0)
}

// BodyGunzipWithLimit returns un-gzipped body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
func (req *Request) BodyGunzipWithLimit(maxBodySize int) ([]byte, error) {
	return gunzipData(req.Body(), maxBodySize)
}

// BodyGunzip returns un-gzipped body data.
//
// This method may be used if the response header contains
// 'Content-Encoding: gzip' for reading un-gzipped body.
// Use Body for reading gzipped response body.
func (resp *Response) BodyGunzip() ([]byte, error) {
	return resp.BodyGunzipWithLimit(0)
}

// BodyGunzipWithLimit returns un-gzipped body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
func (resp *Response) BodyGunzipWithLimit(maxBodySize int) ([]byte, error) {
	return gunzipData(resp.Body(), maxBodySize)
}

func gunzipData(p []byte, maxBodySize int) ([]byte, error) {
	var bb bytebufferpool.ByteBuffer
	_, err := writeGunzip(&bb, p, maxBodySize)
	if err != nil {
		return nil, err
	}
	return bb.B, nil
}

// BodyUnbrotli returns un-brotlied body data.
//
// This method may be used if the request header contains
// 'Content-Encoding: br' for reading un-brotlied body.
// Use Body for reading brotlied request body.
func (req *Request) BodyUnbrotli() ([]byte, error) {
	return req.BodyUnbrotliWithLimit(0)
}

// BodyUnbrotliWithLimit returns un-brotlied body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
func (req *Request) BodyUnbrotliWithLimit(maxBodySize int) ([]byte, error) {
	return unBrotliData(req.Body(), maxBodySize)
}

// BodyUnbrotli returns un-brotlied body data.
//
// This method may be used if the response header contains
// 'Content-Encoding: br' for reading un-brotlied body.
// Use Body for reading brotlied response body.
func (resp *Response) BodyUnbrotli() ([]byte, error) {
	return resp.BodyUnbrotliWithLimit(0)
}

// BodyUnbrotliWithLimit returns un-brotlied body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
func (resp *Response) BodyUnbrotliWithLimit(maxBodySize int) ([]byte, error) {
	return unBrotliData(resp.Body(), maxBodySize)
}

func unBrotliData(p []byte, maxBodySize int) ([]byte, error) {
	var bb bytebufferpool.ByteBuffer
	_, err := writeUnbrotli(&bb, p, maxBodySize)
	if err != nil {
		return nil, err
	}
	return bb.B, nil
}

// BodyInflate returns inflated body data.
//
// This method may be used if the response header contains
// 'Content-Encoding: deflate' for reading inflated request body.
// Use Body for reading deflated request body.
func (req *Request) BodyInflate() ([]byte, error) {
	return req.BodyInflateWithLimit(0)
}

// BodyInflateWithLimit returns inflated body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
func (req *Request) BodyInflateWithLimit(maxBodySize int) ([]byte, error) {
	return inflateData(req.Body(), maxBodySize)
}

// BodyInflate returns inflated body data.
//
// This method may be used if the response header contains
// 'Content-Encoding: deflate' for reading inflated response body.
// Use Body for reading deflated response body.
func (resp *Response) BodyInflate() ([]byte, error) {
	return resp.BodyInflateWithLimit(0)
}

// BodyInflateWithLimit returns inflated body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
func (resp *Response) BodyInflateWithLimit(maxBodySize int) ([]byte, error) {
	return inflateData(resp.Body(), maxBodySize)
}

func (ctx *RequestCtx) RequestBodyStream() io.Reader {
	return ctx.Request.bodyStream
}

func (req *Request) BodyUnzstd() ([]byte, error) {
	return req.BodyUnzstdWithLimit(0)
}

// BodyUnzstdWithLimit returns un-zstd body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// The limit also caps the zstd decoder window. The cap is rounded up to an
// 8 MiB boundary and uses the format's 1 KiB minimum window when maxBodySize
// is smaller. A valid stream that requires a larger window returns
// ErrBodyTooLarge.
//
// If maxBodySize <= 0, then no limit is applied.
func (req *Request) BodyUnzstdWithLimit(maxBodySize int) ([]byte, error) {
	return unzstdData(req.Body(), maxBodySize)
}

func (resp *Response) BodyUnzstd() ([]byte, error) {
	return resp.BodyUnzstdWithLimit(0)
}

// BodyUnzstdWithLimit returns un-zstd body data and limits the size
// of uncompressed body data to maxBodySize bytes.
//
// The limit also caps the zstd decoder window. The cap is rounded up to an
// 8 MiB boundary and uses the format's 1 KiB minimum window when maxBodySize
// is smaller. A valid stream that requires a larger window returns
// ErrBodyTooLarge.
//
// If maxBodySize <= 0, then no limit is applied.
func (resp *Response) BodyUnzstdWithLimit(maxBodySize int) ([]byte, error) {
	return unzstdData(resp.Body(), maxBodySize)
}

func unzstdData(p []byte, maxBodySize int) ([]byte, error) {
	var bb bytebufferpool.ByteBuffer
	_, err := writeUnzstd(&bb, p, maxBodySize)
	if err != nil {
		return nil, err
	}
	return bb.B, nil
}

func inflateData(p []byte, maxBodySize int) ([]byte, error) {
	var bb bytebufferpool.ByteBuffer
	_, err := writeInflate(&bb, p, maxBodySize)
	if err != nil {
		return nil, err
	}
	return bb.B, nil
}

var ErrContentEncodingUnsupported = errors.New("fasthttp: unsupported content-encoding")

// BodyUncompressed returns body data and if needed decompresses it from gzip,
// deflate, brotli or zstd.
//
// This method may be used if the response header contains
// 'Content-Encoding' for reading uncompressed request body.
// Use Body for reading the raw request body.
func (req *Request) BodyUncompressed() ([]byte, error) {
	return req.BodyUncompressedWithLimit(0)
}

// BodyUncompressedWithLimit returns body data and if needed decompresses it from gzip,
// deflate, brotli or zstd. The size of uncompressed data is limited to maxBodySize bytes.
//
// For zstd bodies, the limit also caps the decoder window. The cap is rounded
// up to an 8 MiB boundary and uses the format's 1 KiB minimum window when
// maxBodySize is smaller. A valid stream that requires a larger window
// returns ErrBodyTooLarge.
//
// If maxBodySize <= 0, then no limit is applied.
func (req *Request) BodyUncompressedWithLimit(maxBodySize int) ([]byte, error) {
	// Content codings are case-insensitive, see RFC 9110, section 8.4.1.
	ce := req.Header.ContentEncoding()
	switch {
	case len(ce) == 0:
		return req.Body(), nil
	case caseInsensitiveCompare(ce, strDeflate):
		return req.BodyInflateWithLimit(maxBodySize)
	case caseInsensitiveCompare(ce, strGzip):
		return req.BodyGunzipWithLimit(maxBodySize)
	case caseInsensitiveCompare(ce, strBr):
		return req.BodyUnbrotliWithLimit(maxBodySize)
	case caseInsensitiveCompare(ce, strZstd):
		return req.BodyUnzstdWithLimit(maxBodySize)
	default:
		return nil, ErrContentEncodingUnsupported
	}
}

// BodyUncompressed returns body data and if needed decompresses it from gzip,
// deflate, brotli or zstd.
//
// This method may be used if the response header contains
// 'Content-Encoding' for reading uncompressed response body.
// Use Body for reading the raw response body.
func (resp *Response) BodyUncompressed() ([]byte, error) {
	return resp.BodyUncompressedWithLimit(0)
}

// BodyUncompressedWithLimit returns body data and if needed decompresses it from gzip,
// deflate, brotli or zstd. The size of uncompressed data is limited to maxBodySize bytes.
//
// For zstd bodies, the limit also caps the decoder window. The cap is rounded
// up to an 8 MiB boundary and uses the format's 1 KiB minimum window when
// maxBodySize is smaller. A valid stream that requires a larger window
// returns ErrBodyTooLarge.
//
// If maxBodySize <= 0, then no limit is applied.
func (resp *Response) BodyUncompressedWithLimit(maxBodySize int) ([]byte, error) {
	// Content codings are case-insensitive, see RFC 9110, section 8.4.1.
	ce := resp.Header.ContentEncoding()
	switch {
	case len(ce) == 0:
		return resp.Body(), nil
	case caseInsensitiveCompare(ce, strDeflate):
		return resp.BodyInflateWithLimit(maxBodySize)
	case caseInsensitiveCompare(ce, strGzip):
		return resp.BodyGunzipWithLimit(maxBodySize)
	case caseInsensitiveCompare(ce, strBr):
		return resp.BodyUnbrotliWithLimit(maxBodySize)
	case caseInsensitiveCompare(ce, strZstd):
		return resp.BodyUnzstdWithLimit(maxBodySize)
	default:
		return nil, ErrContentEncodingUnsupported
	}
}

// BodyWriteTo writes request body to w.
func (req *Request) BodyWriteTo(w io.Writer) error {
	if req.bodyStream != nil {
		_, err := copyBodyStream(w, req.bodyStream)
		req.closeBodyStream() //nolint:errcheck
		return err
	}
	if req.onlyMultipartForm() {
		return WriteMultipartForm(w, req.multipartForm, req.multipartFormBoundary)
	}
	_, err := w.Write(req.bodyBytes())
	return err
}

// BodyWriteTo writes response body to w.
func (resp *Response) BodyWriteTo(w io.Writer) error {
	if resp.bodyStream != nil {
		_, err := copyBodyStream(w, resp.bodyStream)
		resp.closeBodyStream(err) //nolint:errcheck
		return err
	}
	_, err := w.Write(resp.bodyBytes())
	return err
}

// AppendBody appends p to response body.
//
// It is safe re-using p after the function returns.
func (resp *Response) AppendBody(p []byte) {
	resp.closeBodyStream(nil)  //nolint:errcheck
	resp.bodyBuffer().Write(p) //nolint:errcheck
}

// AppendBodyString appends s to response body.
func (resp *Response) AppendBodyString(s string) {
	resp.closeBodyStream(nil)        //nolint:errcheck
	resp.bodyBuffer().WriteString(s) //nolint:errcheck
}

// SetBody sets response body.
//
// It is safe re-using body argument after the function returns.
func (resp *Response) SetBody(body []byte) {
	resp.closeBodyStream(nil) //nolint:errcheck
	bodyBuf := resp.bodyBuffer()
	bodyBuf.Reset()
	bodyBuf.Write(body) //nolint:errcheck
}

// SetBodyString sets response body.
func (resp *Response) SetBodyString(body string) {
	resp.closeBodyStream(nil) //nolint:errcheck
	bodyBuf := resp.bodyBuffer()
	bodyBuf.Reset()
	bodyBuf.WriteString(body) //nolint:errcheck
}

// ResetBody resets response body.
func (resp *Response) ResetBody() {
	resp.bodyRaw = nil
	resp.closeBodyStream(nil) //nolint:errcheck
	if resp.body != nil {
		if resp.KeepBodyBuffer || resp.keepBodyBuffer {
			resp.body.Reset()
		} else {
			responseBodyPool.Put(resp.body)
			resp.body = nil
		}
	}
}

// SetBodyRaw sets response body, but without copying it.
//
// From this point onward the body argument must not be changed.
func (resp *Response) SetBodyRaw(body []byte) {
	resp.ResetBody()
	resp.bodyRaw = body
}

// SetBodyRaw sets response body, but without copying it.
//
// From this point onward the body argument must not be changed.
func (req *Request) SetBodyRaw(body []byte) {
	req.ResetBody()
	req.bodyRaw = body
}

// ReleaseBody retires the response body if it is greater than "size" bytes.
//
// This permits GC to reclaim the large buffer.  If used, must be before
// ReleaseResponse.
//
// Use this method only if you really understand how it works.
// The majority of workloads don't need this method.
func (resp *Response) ReleaseBody(size int) {
	resp.bodyRaw = nil
	if resp.body == nil {
		return
	}
	if cap(resp.body.B) > size {
		resp.closeBodyStream(nil) //nolint:errcheck
		resp.body = nil
	}
}

// ReleaseBody retires the request body if it is greater than "size" bytes.
//
// This permits GC to reclaim the large buffer.  If used, must be before
// ReleaseRequest.
//
// Use this method only if you really understand how it works.
// The majority of workloads don't need this method.
func (req *Request) ReleaseBody(size int) {
	req.bodyRaw = nil
	if req.body == nil {
		return
	}
	if cap(req.body.B) > size {
		req.closeBodyStream() //nolint:errcheck
		req.body = nil
	}
}

// SwapBody swaps response body with the given body and returns
// the previous response body.
//
// It is forbidden to use the body passed to SwapBody after
// the function returns.
func (resp *Response) SwapBody(body []byte) []byte {
	bb := resp.bodyBuffer()

	if resp.bodyStream != nil {
		bb.Reset()
		_, err := copyBodyStream(bb, resp.bodyStream)
		resp.closeBodyStream(err) //nolint:errcheck
		if err != nil {
			bb.Reset()
			bb.SetString(err.Error())
		}
	}

	resp.bodyRaw = nil

	oldBody := bb.B
	bb.B = body
	return oldBody
}

// SwapBody swaps request body with the given body and returns
// the previous request body.
//
// It is forbidden to use the body passed to SwapBody after
// the function returns.
func (req *Request) SwapBody(body []byte) []byte {
	bb := req.bodyBuffer()

	if req.bodyStream != nil {
		bb.Reset()
		_, err := copyBodyStream(bb, req.bodyStream)
		req.closeBodyStream() //nolint:errcheck
		if err != nil {
			bb.Reset()
			bb.SetString(err.Error())
		}
	}

	req.bodyRaw = nil

	oldBody := bb.B
	bb.B = body
	return oldBody
}

// Body returns request body.
//
// The returned value is valid until the request is released,
// either though ReleaseRequest or your request handler returning.
// Do not store references to returned value. Make copies instead.
//
// If the body is backed by a stream, Body reads the entire stream into memory.
// Use BodyStream to read it incrementally.
func (req *Request) Body() []byte {
	if req.bodyStream != nil && req.logger != nil {
		req.logger.Printf("WARNING: Request.Body() reads the entire stream into memory. " +
			"Use Request.BodyStream() or Request.BodyWriteTo() instead to avoid out-of-memory errors.")
	}
	if req.bodyRaw != nil {
		return req.bodyRaw
	} else if req.onlyMultipartForm() {
		body, err := marshalMultipartForm(req.multipartForm, req.multipartFormBoundary)
		if err != nil {
			return []byte(err.Error())
		}
		return body
	}
	return req.bodyBytes()
}

// AppendBody appends p to request body.
//
// It is safe re-using p after the function returns.
func (req *Request) AppendBody(p []byte) {
	req.RemoveMultipartFormFiles()
	req.closeBodyStream()     //nolint:errcheck
	req.bodyBuffer().Write(p) //nolint:errcheck
}

// AppendBodyString appends s to request body.
func (req *Request) AppendBodyString(s string) {
	req.RemoveMultipartFormFiles()
	req.closeBodyStream()           //nolint:errcheck
	req.bodyBuffer().WriteString(s) //nolint:errcheck
}

// SetBody sets request body.
//
// It is safe re-using body argument after the function returns.
func (req *Request) SetBody(body []byte) {
	req.RemoveMultipartFormFiles()
	req.closeBodyStream() //nolint:errcheck
	req.bodyBuffer().Set(body)
}

// SetBodyString sets request body.
func (req *Request) SetBodyString(body string) {
	req.RemoveMultipartFormFiles()
	req.closeBodyStream() //nolint:errcheck
	req.bodyBuffer().SetString(body)
}

// ResetBody resets request body.
func (req *Request) ResetBody() {
	req.bodyRaw = nil
	req.RemoveMultipartFormFiles()
	req.closeBodyStream() //nolint:errcheck
	// Not req.bodyStream: the handler may have closed the stream already,
	// which takes it off the request while the server still drains it.
	rs := req.serverStream
	req.serverStream = nil
	if req.body != nil {
		switch {
		case req.KeepBodyBuffer || req.keepBodyBuffer:
			req.body.Reset()
		case rs != nil:
			// The server still drains rs after the handler returns, and it
			// reads its prefetched bytes from this buffer, so leave the buffer
			// to be pooled when the stream is released rather than now.
			rs.body = req.body
			req.body = nil
		default:
			requestBodyPool.Put(req.body)
			req.body = nil
		}
	}
}

// CopyTo copies req contents to dst except of body stream.
//
// A multipart/form-data body that was parsed as it was read, as the server
// does by default, is held as a form and has no bytes of its own. dst gets
// it as the form marshaled again, which is what Body returns, and parses its
// own form on the first call to MultipartForm. dst has no body if the form
// can't be marshaled, e.g. when the temporary file of one of its parts is gone.
func (req *Request) CopyTo(dst *Request) {
	req.copyToSkipBody(dst)
	switch {
	case req.bodyRaw != nil:
		dst.bodyRaw = append(dst.bodyRaw[:0], req.bodyRaw...)
		if dst.body != nil {
			dst.body.Reset()
		}
	case req.onlyMultipartForm():
		buf := dst.bodyBuffer()
		if err := WriteMultipartForm(buf, req.multipartForm, req.multipartFormBoundary); err != nil {
			buf.Reset()
		}
	case req.body != nil:
		dst.bodyBuffer().Set(req.body.B)
	case dst.body != nil:
		dst.body.Reset()
	}
}

func (req *Request) copyToSkipBody(dst *Request) {
	dst.Reset()
	req.Header.CopyTo(&dst.Header)

	req.uri.CopyTo(&dst.uri)
	dst.parsedURI = req.parsedURI
	dst.uriParseErr = req.uriParseErr

	req.postArgs.CopyTo(&dst.postArgs)
	dst.parsedPostArgs = req.parsedPostArgs
	dst.isTLS = req.isTLS

	dst.UseHostHeader = req.UseHostHeader
	dst.DisableRedirectPathNormalizing = req.DisableRedirectPathNormalizing
	dst.logger = req.logger

	// do not copy multipartForm - it will be automatically
	// re-created on the first call to MultipartForm.
}

// CopyTo copies resp contents to dst except of body stream.
// If the body is streamed, call Body before CopyTo to read and copy it.
func (resp *Response) CopyTo(dst *Response) {
	resp.copyToSkipBody(dst)
	switch {
	case resp.bodyRaw != nil:
		dst.bodyRaw = append(dst.bodyRaw, resp.bodyRaw...)
		if dst.body != nil {
			dst.body.Reset()
		}
	case resp.body != nil:
		dst.bodyBuffer().Set(resp.body.B)
	case dst.body != nil:
		dst.body.Reset()
	}
}

func (resp *Response) copyToSkipBody(dst *Response) {
	dst.Reset()
	resp.Header.CopyTo(&dst.Header)
	dst.SkipBody = resp.SkipBody
	dst.raddr = resp.raddr
	dst.laddr = resp.laddr
}

func swapRequestBody(a, b *Request) {
	a.body, b.body = b.body, a.body
	a.bodyRaw, b.bodyRaw = b.bodyRaw, a.bodyRaw
	a.bodyStream, b.bodyStream = b.bodyStream, a.bodyStream

	// This code assumes that if a requestStream was swapped the headers are also swapped or copied.
	if rs, ok := a.bodyStream.(*requestStream); ok {
		rs.header = &a.Header
	}
	if rs, ok := b.bodyStream.(*requestStream); ok {
		rs.header = &b.Header
	}
}

func swapResponseBody(a, b *Response) {
	a.body, b.body = b.body, a.body
	a.bodyRaw, b.bodyRaw = b.bodyRaw, a.bodyRaw
	a.bodyStream, b.bodyStream = b.bodyStream, a.bodyStream
}

// URI returns request URI.
func (req *Request) URI() *URI {
	req.parseURI() //nolint:errcheck
	return &req.uri
}

// SetURI initializes request URI.
// Use this method if a single URI may be reused across multiple requests.
// Otherwise, you can just use SetRequestURI() and it will be parsed as new URI.
// The URI is copied and can be safely modified later.
func (req *Request) SetURI(newURI *URI) {
	if newURI != nil {
		newURI.CopyTo(&req.uri)
		req.parsedURI = true
		req.uriParseErr = nil
		return
	}
	req.uri.Reset()
	req.parsedURI = false
	req.uriParseErr = nil
}

func (req *Request) parseURI() error {
	if req.parsedURI {
		return req.uriParseErr
	}

	req.parsedURI = true
	req.uriParseErr = req.uri.parse(req.Header.Host(), req.Header.RequestURI(), req.isTLS)
	return req.uriParseErr
}

// PostArgs returns POST arguments.
func (req *Request) PostArgs() *Args {
	req.parsePostArgs()
	return &req.postArgs
}

func (req *Request) parsePostArgs() {
	if req.parsedPostArgs {
		return
	}
	req.parsedPostArgs = true

	if !caseInsensitiveHasPrefix(req.Header.ContentType(), strPostArgsContentType) {
		return
	}
	req.postArgs.ParseBytes(req.bodyBytes())
}

// ErrNoMultipartForm means that the request's Content-Type
// isn't 'multipart/form-data'.
var ErrNoMultipartForm = errors.New("fasthttp: request content-type has bad boundary or is not multipart/form-data")

// MultipartForm returns request's multipart form.
//
// Returns ErrNoMultipartForm if request's Content-Type
// isn't 'multipart/form-data'.
//
// This method is equivalent to MultipartFormWithLimit(0), i.e. no body size
// limit is applied during multipart parsing.
//
// RemoveMultipartFormFiles must be called after returned multipart form
// is processed.
func (req *Request) MultipartForm() (*multipart.Form, error) {
	return req.MultipartFormWithLimit(0)
}

// MultipartFormWithLimit returns request's multipart form and limits the
// read multipart body size to maxBodySize bytes.
//
// If maxBodySize <= 0, then no limit is applied.
//
// Returns ErrNoMultipartForm if request's Content-Type
// isn't 'multipart/form-data'.
//
// RemoveMultipartFormFiles must be called after returned multipart form
// is processed.
func (req *Request) MultipartFormWithLimit(maxBodySize int) (*multipart.Form, error) {
	if req.multipartForm != nil {
		return req.multipartForm, nil
	}

	// Every declared body byte of a multipart request has to come off
	// req.bodyStream before we return, on the error paths as much as the
	// success one: ReadForm stops at the closing boundary, so without the
	// drain the leftover bytes are read back as the start of the next request
	// on a keep-alive connection. Draining req.bodyStream directly also avoids
	// comparing reader interface values, which panics for an uncomparable
	// dynamic type set through SetBodyStream.
	//
	// The drain only arms once the headers check out and the size limiter is
	// installed. The early validation errors (missing boundary, unsupported
	// content-encoding, bad gzip header) return before a limiter exists, so
	// draining there could read an entire unbounded upload just to reject it.
	// Those bodies are left to the server's drain, bounded by
	// maxUnreadStreamBodySize, which closes the connection when more than that
	// is left. A body rejected on any later error path is left unread the same
	// way, see below: ReadForm or the limited drain can give up with most of the
	// declared body unread (a corrupt compressed block aborts them before the
	// limiter reaches zero), and reading the rest just to fail it is the thing
	// we are avoiding. A body whose media type isn't multipart/form-data at all
	// is left unread too: the caller only finds that out from ErrNoMultipartForm
	// and may still want to read it.
	//
	// The drain error isn't recorded here. A failed read leaves the connection
	// mid-body, and the server's stream records that itself, see
	// requestStream.failed, where Request.Reset can't clear it.
	var drainBodyStream bool
	if req.bodyStream != nil && isMultipartFormData(req.Header.ContentType()) {
		defer func() {
			if drainBodyStream {
				copyBodyStream(io.Discard, req.bodyStream) //nolint:errcheck
			}
		}()
	}

	req.multipartFormBoundary = string(req.Header.MultipartFormBoundary())
	if req.multipartFormBoundary == "" {
		return nil, ErrNoMultipartForm
	}

	var err error
	ce := req.Header.peek(strContentEncoding)

	if req.bodyStream != nil {
		bodyStream := req.bodyStream
		var lr *io.LimitedReader
		if caseInsensitiveCompare(ce, strGzip) {
			if bodyStream, err = gzip.NewReader(bodyStream); err != nil {
				return nil, fmt.Errorf("cannot gunzip request body: %w", err)
			}
		} else if len(ce) > 0 {
			return nil, fmt.Errorf("unsupported content-encoding: %q", ce)
		}
		if maxBodySize > 0 {
			lr = &io.LimitedReader{
				R: bodyStream,
				N: int64(maxBodySize) + 1,
			}
			bodyStream = lr
		}
		drainBodyStream = true

		mr := multipart.NewReader(bodyStream, req.multipartFormBoundary)
		req.multipartForm, err = mr.ReadForm(8 * 1024)

		// Drain the rest of the declared body through bodyStream so the
		// leftover keeps counting towards maxBodySize; the deferred drain then
		// clears whatever remains on the raw stream so the connection stays
		// framed. Once ReadForm has failed, the form is rejected no matter
		// what follows, so the remainder is left to the server's bounded
		// drain rather than read just to reject it.
		if err == nil {
			if _, drainErr := copyBodyStream(io.Discard, bodyStream); drainErr != nil {
				err = drainErr
			}
		}
		if rs, ok := req.bodyStream.(*requestStream); ok && err == nil && rs.truncated() {
			// The peer stopped sending before Content-Length was reached. A
			// request stream reports that as a plain io.EOF, which the drain
			// above takes for the end of the body.
			err = io.ErrUnexpectedEOF
		}
		if lr != nil && lr.N <= 0 {
			err = ErrBodyTooLarge
		}
		if err != nil {
			// Something went wrong while reading the body: ReadForm or the
			// limited drain failed, the body was truncated, or it exceeded
			// maxBodySize. Don't read the rest of the upload just to reject it,
			// which a corrupt compressed block would otherwise force, since it
			// aborts the drain with the raw body still on the wire. The server's
			// drain takes it from here, bounded by maxUnreadStreamBodySize, and
			// closes the connection when more than that is left.
			drainBodyStream = false
			req.RemoveMultipartFormFiles()
			return nil, fmt.Errorf("cannot read multipart/form-data body: %w", err)
		}
	} else {
		body := req.bodyBytes()
		if caseInsensitiveCompare(ce, strGzip) {
			if body, err = gunzipData(body, maxBodySize); err != nil {
				return nil, fmt.Errorf("cannot gunzip request body: %w", err)
			}
		} else if len(ce) > 0 {
			return nil, fmt.Errorf("unsupported content-encoding: %q", ce)
		}
		if maxBodySize > 0 && len(body) > maxBodySize {
			return nil, fmt.Errorf("cannot read multipart/form-data body: %w", ErrBodyTooLarge)
		}

		req.multipartForm, err = readMultipartForm(bytes.NewReader(body), req.multipartFormBoundary, len(body), len(body))
		if err != nil {
			return nil, err
		}
	}

	return req.multipartForm, nil
}

// isMultipartFormData reports whether contentType declares the
// multipart/form-data media type, with or without parameters. A plain prefix
// match would also take media types such as multipart/form-data-alt, whose
// body the multipart parser never reads.
func isMultipartFormData(contentType []byte) bool {
	if !caseInsensitiveHasPrefix(contentType, strMultipartFormData) {
		return false
	}
	rest := contentType[len(strMultipartFormData):]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	return len(rest) == 0 || rest[0] == ';'
}

func marshalMultipartForm(f *multipart.Form, boundary string) ([]byte, error) {
	var buf bytebufferpool.ByteBuffer
	if err := WriteMultipartForm(&buf, f, boundary); err != nil {
		return nil, err
	}
	return buf.B, nil
}

var errMultipartBoundaryInContent = errors.New("multipart boundary in part content")

// multipartFileWriter checks for delimiter lines, including delimiters split
// across writes. matched is -1 between the start of a line and the next LF
// once the delimiter can no longer match.
type multipartFileWriter struct {
	w         io.Writer
	delimiter []byte
	matched   int
}

func (w *multipartFileWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		if w.matched >= 0 {
			n := min(len(rest), len(w.delimiter)-w.matched)
			if bytes.Equal(rest[:n], w.delimiter[w.matched:w.matched+n]) {
				w.matched += n
				if w.matched == len(w.delimiter) {
					return 0, errMultipartBoundaryInContent
				}
				break
			}
			w.matched = -1
		}
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		w.matched = 0
		rest = rest[i+1:]
	}
	return w.w.Write(p)
}

// WriteMultipartForm writes the given multipart form f with the given
// boundary to w. It returns an error if a line in a field or file starts
// with the boundary delimiter.
func WriteMultipartForm(w io.Writer, f *multipart.Form, boundary string) error {
	// Do not care about memory allocations here, since multipart
	// form processing is slow.
	if boundary == "" {
		return errors.New("form boundary cannot be empty")
	}

	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(boundary); err != nil {
		return fmt.Errorf("cannot use form boundary %q: %w", boundary, err)
	}

	delimiter := "--" + boundary
	lineDelimiter := "\n" + delimiter

	// marshal values
	for k, vv := range f.Value {
		for _, v := range vv {
			if strings.HasPrefix(v, delimiter) || strings.Contains(v, lineDelimiter) {
				return fmt.Errorf("cannot write form field %q: %w", k, errMultipartBoundaryInContent)
			}
			if err := mw.WriteField(k, v); err != nil {
				return fmt.Errorf("cannot write form field %q value %q: %w", k, v, err)
			}
		}
	}

	// marshal files
	for k, fvv := range f.File {
		for _, fv := range fvv {
			vw, err := mw.CreatePart(fv.Header)
			if err != nil {
				return fmt.Errorf("cannot create form file %q (%q): %w", k, fv.Filename, err)
			}
			fh, err := fv.Open()
			if err != nil {
				return fmt.Errorf("cannot open form file %q (%q): %w", k, fv.Filename, err)
			}
			fw := multipartFileWriter{w: vw, delimiter: []byte(delimiter)}
			if _, err = copyZeroAlloc(&fw, fh); err != nil {
				_ = fh.Close()
				return fmt.Errorf("error when copying form file %q (%q): %w", k, fv.Filename, err)
			}
			if err = fh.Close(); err != nil {
				return fmt.Errorf("cannot close form file %q (%q): %w", k, fv.Filename, err)
			}
		}
	}

	if err := mw.Close(); err != nil {
		return fmt.Errorf("error when closing multipart form writer: %w", err)
	}

	return nil
}

func readMultipartForm(r io.Reader, boundary string, size, maxInMemoryFileSize int) (*multipart.Form, error) {
	// Do not care about memory allocations here, since they are tiny
	// compared to multipart data (aka multi-MB files) usually sent
	// in multipart/form-data requests.

	if size <= 0 {
		return nil, fmt.Errorf("form size must be greater than 0: given %d", size)
	}
	lr := &io.LimitedReader{R: r, N: int64(size)}
	mr := multipart.NewReader(lr, boundary)
	f, err := mr.ReadForm(int64(maxInMemoryFileSize))
	if err != nil {
		return nil, fmt.Errorf("cannot read multipart/form-data body: %w", err)
	}
	// ReadForm stops at the closing boundary, so anything the sender placed
	// between it and Content-Length is still unread on r. Discard it, since
	// on a keep-alive connection those bytes are otherwise read back as the
	// beginning of the next request.
	if _, err = copyZeroAlloc(io.Discard, lr); err == nil && lr.N > 0 {
		// r ended before the declared body size was reached.
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		f.RemoveAll() //nolint:errcheck
		return nil, fmt.Errorf("cannot read multipart/form-data body: %w", err)
	}
	return f, nil
}

// Reset clears request contents.
func (req *Request) Reset() {
	req.userValues.Reset() // it should be at the top, since some values might implement io.Closer interface
	if !req.KeepBodyBuffer {
		if bodyPoolSizeLimit := int(atomic.LoadInt64(&requestBodyPoolSizeLimit)); bodyPoolSizeLimit >= 0 && req.body != nil {
			req.ReleaseBody(bodyPoolSizeLimit)
		}
	}
	req.Header.Reset()
	req.resetSkipHeader()
	req.timeout = 0
	req.logger = nil
	req.forceResponseBodyBuffering = false
	req.UseHostHeader = false
	req.DisableRedirectPathNormalizing = false
}

func (req *Request) resetSkipHeader() {
	req.ResetBody()
	req.uri.Reset()
	req.parsedURI = false
	req.uriParseErr = nil
	req.postArgs.Reset()
	req.parsedPostArgs = false
	req.isTLS = false
}

// RemoveMultipartFormFiles removes multipart/form-data temporary files
// associated with the request.
func (req *Request) RemoveMultipartFormFiles() {
	if req.multipartForm != nil {
		// Do not check for error, since these files may be deleted or moved
		// to new places by user code.
		req.multipartForm.RemoveAll() //nolint:errcheck
		req.multipartForm = nil
	}
	req.multipartFormBoundary = ""
}

// Reset clears response contents.
func (resp *Response) Reset() {
	if !resp.preserveBodyBuffer && !resp.KeepBodyBuffer {
		if bodyPoolSizeLimit := int(atomic.LoadInt64(&responseBodyPoolSizeLimit)); bodyPoolSizeLimit >= 0 && resp.body != nil {
			resp.ReleaseBody(bodyPoolSizeLimit)
		}
	}
	resp.resetSkipHeader()
	resp.Header.Reset()
	resp.SkipBody = false
	resp.raddr = nil
	resp.laddr = nil
	resp.ImmediateHeaderFlush = false
	resp.StreamBody = false
}

func (resp *Response) resetSkipHeader() {
	resp.ResetBody()
}

// Read reads request (including body) from the given r.
//
// Read does not limit the request body size. Use ReadLimitBody with a positive
// maxBodySize when reading requests from untrusted sources.
//
// RemoveMultipartFormFiles or Reset must be called after
// reading multipart/form-data request in order to delete temporarily
// uploaded files.
//
// If MayContinue returns true, the caller must:
//
//   - Either send StatusExpectationFailed response if request headers don't
//     satisfy the caller.
//   - Or send StatusContinue response before reading request body
//     with ContinueReadBody.
//   - Or close the connection.
//
// io.EOF is returned if r is closed before reading the first header byte.
func (req *Request) Read(r *bufio.Reader) error {
	return req.ReadLimitBody(r, 0)
}

const defaultMaxInMemoryFileSize = 16 * 1024 * 1024

// ErrGetOnly is returned when server expects only GET requests,
// but some other type of request came (Server.GetOnly option is true).
var ErrGetOnly = errors.New("fasthttp: non-get request received")

// ReadLimitBody reads request from the given r, limiting the body size.
//
// If maxBodySize > 0 and the body size exceeds maxBodySize,
// then ErrBodyTooLarge is returned.
// If maxBodySize <= 0, no limit is applied and the request may consume
// unbounded memory.
//
// RemoveMultipartFormFiles or Reset must be called after
// reading multipart/form-data request in order to delete temporarily
// uploaded files.
//
// If MayContinue returns true, the caller must:
//
//   - Either send StatusExpectationFailed response if request headers don't
//     satisfy the caller.
//   - Or send StatusContinue response before reading request body
//     with ContinueReadBody.
//   - Or close the connection.
//
// io.EOF is returned if r is closed before reading the first header byte.
func (req *Request) ReadLimitBody(r *bufio.Reader, maxBodySize int) error {
	req.resetSkipHeader()
	if err := req.Header.Read(r); err != nil {
		return err
	}

	return req.readLimitBody(r, maxBodySize, false, true)
}

func (req *Request) readLimitBody(r *bufio.Reader, maxBodySize int, getOnly, preParseMultipartForm bool) error {
	// Do not reset the request here - the caller must reset it before
	// calling this method.

	if getOnly && !req.Header.IsGet() && !req.Header.IsHead() {
		return ErrGetOnly
	}

	if req.MayContinue() {
		// 'Expect: 100-continue' header found. Let the caller deciding
		// whether to read request body or
		// to return StatusExpectationFailed.
		return nil
	}

	return req.ContinueReadBody(r, maxBodySize, preParseMultipartForm)
}

func (req *Request) readBodyStream(r *bufio.Reader, maxBodySize int, getOnly, preParseMultipartForm bool) error {
	// Do not reset the request here - the caller must reset it before
	// calling this method.

	if getOnly && !req.Header.IsGet() && !req.Header.IsHead() {
		return ErrGetOnly
	}

	if req.MayContinue() {
		// 'Expect: 100-continue' header found. Let the caller deciding
		// whether to read request body or
		// to return StatusExpectationFailed.
		return nil
	}

	return req.ContinueReadBodyStream(r, maxBodySize, preParseMultipartForm)
}

// MayContinue returns true if the request contains
// 'Expect: 100-continue' header.
//
// It always returns false for HTTP/1.0 requests, since a server must ignore
// the expectation in them (RFC 9110, section 10.1.1).
//
// The caller must do one of the following actions if MayContinue returns true:
//
//   - Either send StatusExpectationFailed response if request headers don't
//     satisfy the caller.
//   - Or send StatusContinue response before reading request body
//     with ContinueReadBody.
//   - Or close the connection.
func (req *Request) MayContinue() bool {
	return req.Header.IsHTTP11() && caseInsensitiveCompare(req.Header.peek(strExpect), str100Continue)
}

// ContinueReadBody reads request body if request header contains
// 'Expect: 100-continue'.
//
// The caller must send StatusContinue response before calling this method.
//
// If maxBodySize > 0 and the body size exceeds maxBodySize,
// then ErrBodyTooLarge is returned.
func (req *Request) ContinueReadBody(r *bufio.Reader, maxBodySize int, preParseMultipartForm ...bool) error {
	var err error
	contentLength := req.Header.ContentLength()
	if contentLength > 0 {
		if maxBodySize > 0 && contentLength > maxBodySize {
			return ErrBodyTooLarge
		}

		if len(preParseMultipartForm) == 0 || preParseMultipartForm[0] {
			// Pre-read multipart form data of known length.
			// This way we limit memory usage for large file uploads, since their contents
			// is streamed into temporary files if file size exceeds defaultMaxInMemoryFileSize.
			req.multipartFormBoundary = string(req.Header.MultipartFormBoundary())
			if req.multipartFormBoundary != "" && len(req.Header.peek(strContentEncoding)) == 0 {
				req.multipartForm, err = readMultipartForm(r, req.multipartFormBoundary, contentLength, defaultMaxInMemoryFileSize)
				if err != nil {
					req.Reset()
				}
				return err
			}
		}
	}

	if contentLength == -2 {
		// identity body has no sense for http requests, since
		// the end of body is determined by connection close.
		// So just ignore request body for requests without
		// 'Content-Length' and 'Transfer-Encoding' headers.
		// refer to https://tools.ietf.org/html/rfc7230#section-3.3.2
		if !req.Header.ignoreBody() {
			req.Header.SetContentLength(0)
		}
		return nil
	}

	if err = req.ReadBody(r, contentLength, maxBodySize); err != nil {
		return err
	}

	if contentLength == -1 {
		err = req.Header.ReadTrailer(r)
		if err != nil {
			if err == io.EOF {
				return ErrBrokenChunk{error: io.ErrUnexpectedEOF}
			}
			return err
		}
	}
	return nil
}

// ReadBody reads request body from the given r, limiting the body size.
//
// If maxBodySize > 0 and the body size exceeds maxBodySize,
// then ErrBodyTooLarge is returned.
func (req *Request) ReadBody(r *bufio.Reader, contentLength, maxBodySize int) (err error) {
	bodyBuf := req.bodyBuffer()
	bodyBuf.Reset()

	switch {
	case contentLength >= 0:
		bodyBuf.B, err = readBody(r, contentLength, maxBodySize, bodyBuf.B)
	case contentLength == -1:
		bodyBuf.B, err = readBodyChunked(r, maxBodySize, bodyBuf.B)
		if err == nil && len(bodyBuf.B) == 0 {
			req.Header.SetContentLength(0)
		}
	default:
		bodyBuf.B, err = readBodyIdentity(r, maxBodySize, bodyBuf.B)
		req.Header.SetContentLength(len(bodyBuf.B))
	}

	if err != nil {
		req.Reset()
		return err
	}
	return nil
}

// ContinueReadBodyStream reads request body if request header contains
// 'Expect: 100-continue'.
//
// The caller must send StatusContinue response before calling this method.
//
// A body larger than a positive maxBodySize is made available through
// BodyStream, including multipart forms that would otherwise be pre-parsed.
func (req *Request) ContinueReadBodyStream(r *bufio.Reader, maxBodySize int, preParseMultipartForm ...bool) error {
	var err error
	contentLength := req.Header.ContentLength()
	if contentLength > 0 && (maxBodySize <= 0 || contentLength <= maxBodySize) {
		if len(preParseMultipartForm) == 0 || preParseMultipartForm[0] {
			// Pre-read multipart form data of known length.
			// This way we limit memory usage for large file uploads, since their contents
			// is streamed into temporary files if file size exceeds defaultMaxInMemoryFileSize.
			req.multipartFormBoundary = b2s(req.Header.MultipartFormBoundary())
			if req.multipartFormBoundary != "" && len(req.Header.peek(strContentEncoding)) == 0 {
				req.multipartForm, err = readMultipartForm(r, req.multipartFormBoundary, contentLength, defaultMaxInMemoryFileSize)
				if err != nil {
					req.Reset()
				}
				return err
			}
		}
	}

	if contentLength == -2 {
		// identity body has no sense for http requests, since
		// the end of body is determined by connection close.
		// So just ignore request body for requests without
		// 'Content-Length' and 'Transfer-Encoding' headers.

		// refer to https://tools.ietf.org/html/rfc7230#section-3.3.2
		if !req.Header.ignoreBody() {
			req.Header.SetContentLength(0)
		}
		return nil
	}

	bodyBuf := req.bodyBuffer()
	bodyBuf.Reset()
	bodyBuf.B, err = readBodyWithStreaming(r, contentLength, maxBodySize, bodyBuf.B)
	if err != nil {
		if err == ErrBodyTooLarge {
			req.Header.SetContentLength(contentLength)
			req.body = bodyBuf
			req.bodyStream = acquireRequestStream(bodyBuf, r, &req.Header)
			return nil
		}
		if err == errChunkedStream {
			req.body = bodyBuf
			req.bodyStream = acquireRequestStream(bodyBuf, r, &req.Header)
			return nil
		}
		req.Reset()
		return err
	}

	req.body = bodyBuf
	req.bodyStream = acquireRequestStream(bodyBuf, r, &req.Header)
	req.Header.SetContentLength(contentLength)
	return nil
}

// Read reads response (including body) from the given r.
//
// Read does not limit the response body size. Use ReadLimitBody with a positive
// maxBodySize when reading responses from untrusted sources.
// If StreamBody is true, the caller must not read from or reuse r until
// BodyStream is fully read or CloseBodyStream is called.
//
// io.EOF is returned if r is closed before reading the first header byte.
func (resp *Response) Read(r *bufio.Reader) error {
	return resp.ReadLimitBody(r, 0)
}

// maxInterimResponses limits the number of consecutive informational responses
// accepted before ReadLimitBody returns errTooManyInterimResponses.
const maxInterimResponses = 100

var errTooManyInterimResponses = errors.New("fasthttp: too many 1xx informational responses received")

// ReadLimitBody reads response headers from the given r,
// then reads the body using the ReadBody function and limiting the body size.
//
// Informational responses other than "101 Switching Protocols" are consumed
// before the final response is read.
//
// If resp.SkipBody is true then it skips reading the response body.
//
// If maxBodySize > 0 and the body size exceeds maxBodySize,
// then ErrBodyTooLarge is returned.
// If maxBodySize <= 0, no limit is applied and the response may consume
// unbounded memory.
// If StreamBody is true, maxBodySize is ignored and the response body is
// exposed through BodyStream without being fully buffered.
// The caller must not read from or reuse r until BodyStream is fully read or
// CloseBodyStream is called.
//
// io.EOF is returned if r is closed before reading the first header byte.
func (resp *Response) ReadLimitBody(r *bufio.Reader, maxBodySize int) error {
	resp.resetSkipHeader()
	err := resp.Header.Read(r)
	if err != nil {
		return err
	}

	for n := 0; ; n++ {
		if resp.Header.statusCode < 100 ||
			resp.Header.statusCode > 199 ||
			resp.Header.statusCode == StatusSwitchingProtocols {
			break
		}
		if n >= maxInterimResponses {
			return errTooManyInterimResponses
		}
		if err = resp.Header.Read(r); err != nil {
			return err
		}
	}

	if !resp.mustSkipBody() {
		err = resp.ReadBody(r, maxBodySize)
		if err != nil {
			return err
		}
	}

	// A response without a body can't have trailers.
	if resp.Header.ContentLength() == -1 && !resp.StreamBody && !resp.mustSkipBody() {
		err = resp.Header.ReadTrailer(r)
		if err != nil {
			if err == io.EOF {
				return ErrBrokenChunk{error: io.ErrUnexpectedEOF}
			}
			return err
		}
	}
	return nil
}

// ReadBody reads response body from the given r, limiting the body size.
//
// If maxBodySize > 0 and the body size exceeds maxBodySize,
// then ErrBodyTooLarge is returned.
//
// If StreamBody is true, maxBodySize is ignored and the response body is
// exposed through BodyStream without being fully buffered.
// The caller must not read from or reuse r until BodyStream is fully read or
// CloseBodyStream is called.
func (resp *Response) ReadBody(r *bufio.Reader, maxBodySize int) (err error) {
	bodyBuf := resp.bodyBuffer()
	bodyBuf.Reset()

	contentLength := resp.Header.ContentLength()
	if resp.StreamBody {
		resp.bodyStream = acquireResponseStream(bodyBuf, r, &resp.Header)
		return nil
	}

	switch {
	case contentLength >= 0:
		bodyBuf.B, err = readBody(r, contentLength, maxBodySize, bodyBuf.B)
	case contentLength == -1:
		bodyBuf.B, err = readBodyChunked(r, maxBodySize, bodyBuf.B)
	default:
		bodyBuf.B, err = readBodyIdentity(r, maxBodySize, bodyBuf.B)
		resp.Header.SetContentLength(len(bodyBuf.B))
	}
	return err
}

func (resp *Response) mustSkipBody() bool {
	return resp.SkipBody || resp.Header.mustSkipContentLength()
}

var errRequestHostRequired = errors.New("missing required host header in request")

// WriteTo writes request to w. It implements io.WriterTo.
func (req *Request) WriteTo(w io.Writer) (int64, error) {
	return writeBufio(req, w)
}

// WriteTo writes response to w. It implements io.WriterTo.
func (resp *Response) WriteTo(w io.Writer) (int64, error) {
	return writeBufio(resp, w)
}

func writeBufio(hw httpWriter, w io.Writer) (int64, error) {
	sw := acquireStatsWriter(w)
	bw := acquireBufioWriter(sw)
	errw := hw.Write(bw)
	errf := bw.Flush()
	releaseBufioWriter(bw)
	n := sw.bytesWritten
	releaseStatsWriter(sw)

	err := errw
	if err == nil {
		err = errf
	}
	return n, err
}

type statsWriter struct {
	w            io.Writer
	bytesWritten int64
}

func (w *statsWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.bytesWritten += int64(n)
	return n, err
}

func (w *statsWriter) WriteString(s string) (int, error) {
	n, err := w.w.Write(s2b(s))
	w.bytesWritten += int64(n)
	return n, err
}

func acquireStatsWriter(w io.Writer) *statsWriter {
	v := statsWriterPool.Get()
	if v == nil {
		return &statsWriter{
			w: w,
		}
	}
	sw := v.(*statsWriter) //nolint:forcetypeassert
	sw.w = w
	return sw
}

func releaseStatsWriter(sw *statsWriter) {
	sw.w = nil
	sw.bytesWritten = 0
	statsWriterPool.Put(sw)
}

var statsWriterPool sync.Pool

func acquireBufioWriter(w io.Writer) *bufio.Writer {
	v := bufioWriterPool.Get()
	if v == nil {
		return bufio.NewWriter(w)
	}
	bw := v.(*bufio.Writer) //nolint:forcetypeassert
	bw.Reset(w)
	return bw
}

func releaseBufioWriter(bw *bufio.Writer) {
	bufioWriterPool.Put(bw)
}

var bufioWriterPool sync.Pool

func (req *Request) onlyMultipartForm() bool {
	return req.multipartForm != nil && (req.body == nil || len(req.body.B) == 0)
}

// Write writes request to w.
//
// Write doesn't flush request to w for performance reasons.
//
// See also WriteTo.
func (req *Request) Write(w *bufio.Writer) error {
	if len(req.Header.Host()) == 0 || req.parsedURI {
		uri := req.URI()
		host := uri.Host()
		if len(req.Header.Host()) == 0 {
			if len(host) == 0 {
				return errRequestHostRequired
			}
			req.Header.SetHostBytes(host)
		} else if !req.UseHostHeader {
			req.Header.SetHostBytes(host)
		}
		req.Header.SetRequestURIBytes(req.requestURIFromURI())

		// Like net/http, only fill in Authorization from the userinfo
		// if it hasn't been set already.
		if len(uri.username) > 0 && len(req.Header.peek(strAuthorization)) == 0 {
			// RequestHeader.SetBytesKV only uses RequestHeader.bufKV.key
			// So we are free to use RequestHeader.bufKV.value as a scratch pad for
			// the base64 encoding.
			nl := len(uri.username) + len(uri.password) + 1
			nb := nl + len(strBasicSpace)
			tl := nb + base64.StdEncoding.EncodedLen(nl)
			if tl > cap(req.Header.bufV) {
				req.Header.bufV = make([]byte, 0, tl)
			}
			buf := req.Header.bufV[:0]
			buf = append(buf, uri.username...)
			buf = append(buf, strColon...)
			buf = append(buf, uri.password...)
			buf = append(buf, strBasicSpace...)
			base64.StdEncoding.Encode(buf[nb:tl], buf[:nl])
			req.Header.SetBytesKV(strAuthorization, buf[nl:tl])
		}
	}

	if req.bodyStream != nil {
		return req.writeBodyStream(w)
	}

	body := req.bodyBytes()
	var err error
	if req.onlyMultipartForm() {
		body, err = marshalMultipartForm(req.multipartForm, req.multipartFormBoundary)
		if err != nil {
			return fmt.Errorf("error when marshaling multipart form: %w", err)
		}
		req.Header.SetMultipartFormBoundary(req.multipartFormBoundary)
	}

	if len(body) == 0 {
		body = req.postArgs.QueryString()
	}
	hasBody := len(body) != 0 || !req.Header.ignoreBody()
	chunked := hasBody && len(req.Header.trailer) > 0 && req.Header.IsHTTP11()
	contentLength := len(body)
	if chunked {
		contentLength = -1
	}
	if req.Header.disableSpecialHeader {
		if err = req.Header.setRawBodyFraming(contentLength, hasBody); err != nil {
			return err
		}
	} else if hasBody || req.Header.contentLength > 0 || len(peekArgBytes(req.Header.h, strTransferEncoding)) > 0 {
		req.Header.SetContentLength(contentLength)
	}
	if chunked {
		if len(body) > 0 && !req.Header.noDefaultContentType && len(req.Header.ContentType()) == 0 {
			req.Header.SetContentTypeBytes(strDefaultContentType)
		}
		if err = req.Header.Write(w); err != nil {
			return err
		}
		if err = writeBufferedBodyChunked(w, body); err != nil {
			return err
		}
		return req.Header.writeTrailer(w)
	}
	if err = req.Header.Write(w); err != nil {
		return err
	}
	if hasBody {
		_, err = w.Write(body)
	} else if len(body) > 0 {
		if req.secureErrorLogMessage {
			return errors.New("non-zero body for non-post request")
		}
		return fmt.Errorf("non-zero body for non-post request: body=%q", body)
	}
	return err
}

// WriteGzip writes response with gzipped body to w.
//
// The method gzips response body and sets 'Content-Encoding: gzip'
// header before writing response to w.
//
// WriteGzip doesn't flush response to w for performance reasons.
func (resp *Response) WriteGzip(w *bufio.Writer) error {
	return resp.WriteGzipLevel(w, CompressDefaultCompression)
}

// WriteGzipLevel writes response with gzipped body to w.
//
// Level is the desired compression level:
//
//   - CompressNoCompression
//   - CompressBestSpeed
//   - CompressBestCompression
//   - CompressDefaultCompression
//   - CompressHuffmanOnly
//
// The method gzips response body and sets 'Content-Encoding: gzip'
// header before writing response to w.
//
// WriteGzipLevel doesn't flush response to w for performance reasons.
func (resp *Response) WriteGzipLevel(w *bufio.Writer, level int) error {
	resp.gzipBody(level)
	return resp.Write(w)
}

// WriteDeflate writes response with deflated body to w.
//
// The method deflates response body and sets 'Content-Encoding: deflate'
// header before writing response to w.
//
// WriteDeflate doesn't flush response to w for performance reasons.
func (resp *Response) WriteDeflate(w *bufio.Writer) error {
	return resp.WriteDeflateLevel(w, CompressDefaultCompression)
}

// WriteDeflateLevel writes response with deflated body to w.
//
// Level is the desired compression level:
//
//   - CompressNoCompression
//   - CompressBestSpeed
//   - CompressBestCompression
//   - CompressDefaultCompression
//   - CompressHuffmanOnly
//
// The method deflates response body and sets 'Content-Encoding: deflate'
// header before writing response to w.
//
// WriteDeflateLevel doesn't flush response to w for performance reasons.
func (resp *Response) WriteDeflateLevel(w *bufio.Writer, level int) error {
	resp.deflateBody(level)
	return resp.Write(w)
}

func (resp *Response) brotliBody(level int) {
	if len(resp.Header.ContentEncoding()) > 0 {
		// It looks like the body is already compressed.
		// Do not compress it again.
		return
	}

	if !resp.Header.isCompressibleContentType() {
		// The content-type cannot be compressed.
		return
	}

	if resp.bodyStream != nil {
		// Reset Content-Length to -1, since it is impossible
		// to determine body size beforehand of streamed compression.
		// For https://github.com/valyala/fasthttp/issues/176 .
		resp.Header.SetContentLength(-1)

		// Do not care about memory allocations here, since brotli is slow
		// and allocates a lot of memory by itself.
		resp.bodyStream = newCompressedBodyStream(resp.bodyStream, level, compressBrotliBodyStream)
	} else {
		bodyBytes := resp.bodyBytes()
		if len(bodyBytes) < minCompressLen {
			// There is no sense in spending CPU time on small body compression,
			// since there is a very high probability that the compressed
			// body size will be bigger than the original body size.
			return
		}
		w := responseBodyPool.Get()
		w.B = AppendBrotliBytesLevel(w.B, bodyBytes, level)

		// Hack: swap resp.body with w.
		if resp.body != nil {
			responseBodyPool.Put(resp.body)
		}
		resp.body = w
		resp.bodyRaw = nil
	}
	resp.Header.SetContentEncodingBytes(strBr)
	resp.Header.addVaryBytes(strAcceptEncoding)
}

func (resp *Response) gzipBody(level int) {
	if len(resp.Header.ContentEncoding()) > 0 {
		// It looks like the body is already compressed.
		// Do not compress it again.
		return
	}

	if !resp.Header.isCompressibleContentType() {
		// The content-type cannot be compressed.
		return
	}

	if resp.bodyStream != nil {
		// Reset Content-Length to -1, since it is impossible
		// to determine body size beforehand of streamed compression.
		// For https://github.com/valyala/fasthttp/issues/176 .
		resp.Header.SetContentLength(-1)

		// Do not care about memory allocations here, since gzip is slow
		// and allocates a lot of memory by itself.
		resp.bodyStream = newCompressedBodyStream(resp.bodyStream, level, compressGzipBodyStream)
	} else {
		bodyBytes := resp.bodyBytes()
		if len(bodyBytes) < minCompressLen {
			// There is no sense in spending CPU time on small body compression,
			// since there is a very high probability that the compressed
			// body size will be bigger than the original body size.
			return
		}
		w := responseBodyPool.Get()
		w.B = AppendGzipBytesLevel(w.B, bodyBytes, level)

		// Hack: swap resp.body with w.
		if resp.body != nil {
			responseBodyPool.Put(resp.body)
		}
		resp.body = w
		resp.bodyRaw = nil
	}
	resp.Header.SetContentEncodingBytes(strGzip)
	resp.Header.addVaryBytes(strAcceptEncoding)
}

func (resp *Response) deflateBody(level int) {
	if len(resp.Header.ContentEncoding()) > 0 {
		// It looks like the body is already compressed.
		// Do not compress it again.
		return
	}

	if !resp.Header.isCompressibleContentType() {
		// The content-type cannot be compressed.
		return
	}

	if resp.bodyStream != nil {
		// Reset Content-Length to -1, since it is impossible
		// to determine body size beforehand of streamed compression.
		// For https://github.com/valyala/fasthttp/issues/176 .
		resp.Header.SetContentLength(-1)

		// Do not care about memory allocations here, since flate is slow
		// and allocates a lot of memory by itself.
		resp.bodyStream = newCompressedBodyStream(resp.bodyStream, level, compressDeflateBodyStream)
	} else {
		bodyBytes := resp.bodyBytes()
		if len(bodyBytes) < minCompressLen {
			// There is no sense in spending CPU time on small body compression,
			// since there is a very high probability that the compressed
			// body size will be bigger than the original body size.
			return
		}
		w := responseBodyPool.Get()
		w.B = AppendDeflateBytesLevel(w.B, bodyBytes, level)

		// Hack: swap resp.body with w.
		if resp.body != nil {
			responseBodyPool.Put(resp.body)
		}
		resp.body = w
		resp.bodyRaw = nil
	}
	resp.Header.SetContentEncodingBytes(strDeflate)
	resp.Header.addVaryBytes(strAcceptEncoding)
}

func (resp *Response) zstdBody(level int) {
	if len(resp.Header.ContentEncoding()) > 0 {
		return
	}

	if !resp.Header.isCompressibleContentType() {
		return
	}

	if resp.bodyStream != nil {
		// Reset Content-Length to -1, since it is impossible
		// to determine body size beforehand of streamed compression.
		// For
		resp.Header.SetContentLength(-1)

		// Do not care about memory allocations here, since flate is slow
		// and allocates a lot of memory by itself.
		resp.bodyStream = newCompressedBodyStream(resp.bodyStream, level, compressZstdBodyStream)
	} else {
		bodyBytes := resp.bodyBytes()
		if len(bodyBytes) < minCompressLen {
			return
		}
		w := responseBodyPool.Get()
		w.B = AppendZstdBytesLevel(w.B, bodyBytes, level)

		if resp.body != nil {
			responseBodyPool.Put(resp.body)
		}
		resp.body = w
		resp.bodyRaw = nil
	}
	resp.Header.SetContentEncodingBytes(strZstd)
	resp.Header.addVaryBytes(strAcceptEncoding)
}

type compressedBodyStream struct {
	r io.ReadCloser // compressed output, started by the first Read

	bodyStream io.Reader
	level      int
	compress   compressBodyStream

	done chan struct{}

	startOnce     sync.Once
	closeReadOnce sync.Once
	closeReadErr  error

	originalLock   sync.Mutex
	originalClosed bool
	closeErr       error
}

// Read starts compressing on the first call, so the body stream is read only
// once the server writes the body, after the headers.
func (s *compressedBodyStream) Read(p []byte) (int, error) {
	s.startOnce.Do(func() { s.r = NewStreamReader(s.write) })
	if s.r == nil {
		return 0, io.ErrClosedPipe
	}
	return s.r.Read(p)
}

func (s *compressedBodyStream) Close() error {
	s.closeReadOnce.Do(func() {
		started := true
		s.startOnce.Do(func() { started = false })
		if !started {
			// A body discarded unread, as for HEAD, is closed like an
			// uncompressed one.
			s.closeReadErr = s.closeOriginal(nil)
			return
		}
		s.closeReadErr = s.r.Close()
		if err := s.closeOriginalForDiscard(); s.closeReadErr == nil {
			s.closeReadErr = err
		}
	})
	err := s.closeReadErr
	select {
	case <-s.done:
		if err == nil {
			err = s.closeErr
		}
	default:
	}
	return err
}

func (s *compressedBodyStream) write(sw *bufio.Writer) {
	s.closeErr = s.closeOriginal(s.compress(sw, s.bodyStream, s.level))
	close(s.done)
}

func (s *compressedBodyStream) closeOriginal(wErr error) error {
	s.originalLock.Lock()
	defer s.originalLock.Unlock()

	var err error
	if !s.originalClosed {
		if bsc, ok := s.bodyStream.(io.Closer); ok {
			err = bsc.Close()
		}
		s.originalClosed = true
	}
	if bsc, ok := s.bodyStream.(ReadCloserWithError); ok {
		if errc := bsc.CloseWithError(wErr); err == nil {
			err = errc
		}
	}
	if bsr, ok := s.bodyStream.(*requestStream); ok && bsr.releaseOnClose {
		releaseRequestStream(bsr)
	}
	return err
}

func (s *compressedBodyStream) closeOriginalForDiscard() error {
	// FS readers return to their pool on Close. Only the compression
	// goroutine can release them once it has finished reading.
	switch s.bodyStream.(type) {
	case *fsSmallFileReader, *bigFileReader:
		return nil
	}

	s.originalLock.Lock()
	defer s.originalLock.Unlock()

	if s.originalClosed {
		return nil
	}
	bsc, ok := s.bodyStream.(io.Closer)
	if !ok {
		return nil
	}
	s.originalClosed = true
	return bsc.Close()
}

type compressBodyStream func(sw *bufio.Writer, bodyStream io.Reader, level int) error

func newCompressedBodyStream(bodyStream io.Reader, level int, compress compressBodyStream) io.ReadCloser {
	if _, ok := bodyStream.(*streamPipe); ok {
		return newBoundedCompressedBodyStream(bodyStream, level, compress)
	}
	return &compressedBodyStream{
		bodyStream: bodyStream,
		level:      level,
		compress:   compress,
		done:       make(chan struct{}),
	}
}

func compressBrotliBodyStream(sw *bufio.Writer, bodyStream io.Reader, level int) error {
	zw := acquireStacklessBrotliWriter(sw, level)
	fw := &flushWriter{
		wf: zw,
		bw: sw,
	}
	_, wErr := copyBodyStream(fw, bodyStream)
	_ = releaseStacklessBrotliWriter(zw, level)
	return wErr
}

func compressGzipBodyStream(sw *bufio.Writer, bodyStream io.Reader, level int) error {
	zw := acquireStacklessGzipWriter(sw, level)
	fw := &flushWriter{
		wf: zw,
		bw: sw,
	}
	_, wErr := copyBodyStream(fw, bodyStream)
	_ = releaseStacklessGzipWriter(zw, level)
	return wErr
}

func compressDeflateBodyStream(sw *bufio.Writer, bodyStream io.Reader, level int) error {
	zw := acquireStacklessDeflateWriter(sw, level)
	fw := &flushWriter{
		wf: zw,
		bw: sw,
	}
	_, wErr := copyBodyStream(fw, bodyStream)
	_ = releaseStacklessDeflateWriter(zw, level)
	return wErr
}

func compressZstdBodyStream(sw *bufio.Writer, bodyStream io.Reader, level int) error {
	zw := acquireStacklessZstdWriter(sw, level)
	fw := &flushWriter{
		wf: zw,
		bw: sw,
	}
	_, wErr := copyBodyStream(fw, bodyStream)
	_ = releaseStacklessZstdWriter(zw, level)
	return wErr
}

func closeBodyStreamReader(bodyStream io.Reader, wErr error) error {
	var err error
	if bsc, ok := bodyStream.(io.Closer); ok {
		err = bsc.Close()
	}
	if bsc, ok := bodyStream.(ReadCloserWithError); ok {
		if errc := bsc.CloseWithError(wErr); err == nil {
			err = errc
		}
	}
	if bsr, ok := bodyStream.(*requestStream); ok && bsr.releaseOnClose {
		releaseRequestStream(bsr)
	}
	return err
}

// Bodies with sizes smaller than minCompressLen aren't compressed at all.
const minCompressLen = 200

type writeFlusher interface {
	io.Writer
	Flush() error
}

type flushWriter struct {
	wf writeFlusher
	bw *bufio.Writer
}

func (w *flushWriter) Write(p []byte) (int, error) {
	n, err := w.wf.Write(p)
	if err != nil {
		return 0, err
	}
	if err = w.wf.Flush(); err != nil {
		return 0, err
	}
	if err = w.bw.Flush(); err != nil {
		return 0, err
	}
	return n, nil
}

func (w *flushWriter) WriteString(s string) (int, error) {
	return w.Write(s2b(s))
}

// Write writes response to w.
//
// Write doesn't flush response to w for performance reasons.
//
// See also WriteTo.
func (resp *Response) Write(w *bufio.Writer) error {
	return resp.write(nil, w)
}

// write serializes the response into w. conn must be the connection w buffers
// for, or nil.
func (resp *Response) write(conn net.Conn, w *bufio.Writer) error {
	sendBody := !resp.mustSkipBody()

	if resp.bodyStream != nil {
		return resp.writeBodyStream(w, sendBody)
	}

	body := resp.bodyBytes()
	bodyLen := len(body)
	if sendBody || bodyLen > 0 {
		resp.Header.SetContentLength(bodyLen)
	}
	if sendBody && len(resp.Header.trailer) > 0 && resp.Header.IsHTTP11() {
		resp.Header.SetContentLength(-1)
		if err := resp.Header.Write(w); err != nil {
			return err
		}
		if err := writeBufferedBodyChunked(w, body); err != nil {
			return err
		}
		return resp.Header.writeTrailer(w)
	}
	header := resp.Header.serialize(w)
	// A response the buffer cannot hold at all costs a partial copy and a
	// second write; writev sends both pieces from where they already are.
	if sendBody && bodyLen > 0 && len(header)+bodyLen > w.Size() {
		if vw := vectorWriter(conn); vw != nil {
			return resp.writeVectored(vw, w, header, body)
		}
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	if sendBody {
		if _, err := w.Write(body); err != nil {
			return err
		}
	}
	return nil
}

// writeVectored sends the header and body to vw as one writev. w buffers for
// vw, so what it still holds has to go out first to keep the order; a header
// built in w's free space stays intact through that flush.
func (resp *Response) writeVectored(vw io.Writer, w *bufio.Writer, header, body []byte) error {
	if w.Buffered() > 0 {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	resp.vec[0], resp.vec[1] = header, body
	resp.bufs = resp.vec[:]
	_, err := resp.bufs.WriteTo(vw)
	// WriteTo consumes the slice, but the array still refers to the body; a
	// pooled response must not hold it.
	resp.bufs = nil
	resp.vec[0], resp.vec[1] = nil, nil
	return err
}

// vectorWriter returns c when net.Buffers writes to it with a single writev,
// and nil otherwise. On anything else, a TLS connection above all, net.Buffers
// falls back to writing the pieces one at a time.
func vectorWriter(c net.Conn) io.Writer {
	switch c := c.(type) {
	case *net.TCPConn:
		return c
	case *net.UnixConn:
		return c
	case *perIPConn:
		// It only overrides Close.
		return vectorWriter(c.Conn)
	}
	return nil
}

func (req *Request) writeBodyStream(w *bufio.Writer) error {
	var err error

	contentLength := req.Header.ContentLength()
	if req.Header.disableSpecialHeader && req.Header.contentLength != -2 {
		// SetBodyStream's size is authoritative for outgoing raw headers.
		// A parsed raw request has no dedicated size, so use its validated
		// framing field when forwarding its body stream.
		contentLength = req.Header.contentLength
	}
	if contentLength < 0 && !req.Header.disableSpecialHeader {
		lrSize := limitedReaderSize(req.bodyStream)
		if lrSize >= 0 {
			contentLength = int(lrSize)
			if int64(contentLength) != lrSize {
				contentLength = -1
			}
			if contentLength >= 0 {
				req.Header.SetContentLength(contentLength)
			}
		}
	}
	if req.Header.disableSpecialHeader {
		if err = req.Header.setRawBodyFraming(contentLength, true); err != nil {
			_ = req.closeBodyStream()
			return err
		}
	} else if contentLength < 0 {
		req.Header.SetContentLength(-1)
	}
	req.Header.written = true
	if err = req.Header.Write(w); err == nil {
		if contentLength >= 0 {
			err = writeBodyFixedSize(w, req.bodyStream, int64(contentLength), &req.bodyStreamWriter)
		} else if err = writeBodyChunked(w, req.bodyStream); err == nil {
			err = req.Header.writeTrailer(w)
		}
	}
	req.Header.written = false
	errc := req.closeBodyStream()
	if err == nil {
		err = errc
	}
	return err
}

// ErrBodyStreamWritePanic is returned when panic happens during writing body stream.
type ErrBodyStreamWritePanic struct {
	error
}

func (resp *Response) writeBodyStream(w *bufio.Writer, sendBody bool) (err error) {
	resp.Header.written = true
	defer func() {
		resp.Header.written = false
		if r := recover(); r != nil {
			err = &ErrBodyStreamWritePanic{
				error: fmt.Errorf("panic while writing body stream: %+v", r),
			}
		}
	}()

	contentLength := resp.Header.ContentLength()
	if contentLength < 0 {
		lrSize := limitedReaderSize(resp.bodyStream)
		if lrSize >= 0 {
			contentLength = int(lrSize)
			if int64(contentLength) != lrSize {
				contentLength = -1
			}
			if contentLength >= 0 {
				resp.Header.SetContentLength(contentLength)
			}
		}
	}
	if contentLength >= 0 {
		if err = resp.Header.Write(w); err == nil {
			if resp.ImmediateHeaderFlush {
				err = w.Flush()
			}
			if err == nil && sendBody {
				err = writeBodyFixedSize(w, resp.bodyStream, int64(contentLength), &resp.bodyStreamWriter)
			}
		}
	} else {
		resp.Header.SetContentLength(-1)
		if err = resp.Header.Write(w); err == nil {
			if resp.ImmediateHeaderFlush {
				err = w.Flush()
			}
			// Trailers frame the body, so a response without one has none.
			if err == nil && sendBody {
				if err = writeBodyChunked(w, resp.bodyStream); err == nil {
					err = resp.Header.writeTrailer(w)
				}
			}
		}
	}
	errc := resp.closeBodyStream(err)
	if err == nil {
		err = errc
	}
	return err
}

func (req *Request) closeBodyStream() error {
	if req.bodyStream == nil {
		return nil
	}
	var err error
	if bsc, ok := req.bodyStream.(io.Closer); ok {
		err = bsc.Close()
	}
	// A *requestStream reads directly from the connection, so the server loop
	// owns it: it drains any unread body and returns the stream to the pool
	// once the connection can be reused, or drops it when closing. Releasing it
	// here would let a handler abandon an unread body and desync the next
	// request, so leave that to the server.
	req.bodyStream = nil
	return err
}

func (resp *Response) closeBodyStream(wErr error) error {
	if resp.bodyStream == nil {
		return nil
	}
	err := closeBodyStreamReader(resp.bodyStream, wErr)
	resp.bodyStream = nil
	return err
}

// String returns request representation.
//
// Returns error message instead of request representation on error.
//
// Use Write instead of String for performance-critical code.
func (req *Request) String() string {
	return getHTTPString(req)
}

// String returns response representation.
//
// Returns error message instead of response representation on error.
//
// Use Write instead of String for performance-critical code.
func (resp *Response) String() string {
	return getHTTPString(resp)
}

// SetUserValue stores the given value (arbitrary object)
// under the given key in Request.
//
// The value stored in Request may be obtained by UserValue*.
//
// This functionality may be useful for passing arbitrary values between
// functions involved in request processing.
//
// All the values are removed from Request after returning from the top
// RequestHandler. Additionally, Close method is called on each value
// implementing io.Closer before removing the value from Request.
func (req *Request) SetUserValue(key, value any) {
	req.userValues.Set(key, value)
}

// SetUserValueBytes stores the given value (arbitrary object)
// under the given key in Request.
//
// The value stored in Request may be obtained by UserValue*.
//
// This functionality may be useful for passing arbitrary values between
// functions involved in request processing.
//
// All the values stored in Request are deleted after returning from RequestHandler.
func (req *Request) SetUserValueBytes(key []byte, value any) {
	req.userValues.SetBytes(key, value)
}

// UserValue returns the value stored via SetUserValue* under the given key.
func (req *Request) UserValue(key any) any {
	return req.userValues.Get(key)
}

// UserValueBytes returns the value stored via SetUserValue*
// under the given key.
func (req *Request) UserValueBytes(key []byte) any {
	return req.userValues.GetBytes(key)
}

// VisitUserValues calls visitor for each existing userValue with a key that is a string or []byte.
//
// visitor must not retain references to key and value after returning.
// Make key and/or value copies if you need storing them after returning.
func (req *Request) VisitUserValues(visitor func([]byte, any)) {
	for i, n := 0, len(req.userValues); i < n; i++ {
		kv := &req.userValues[i]
		if key, ok := kv.key.(string); ok {
			visitor(s2b(key), kv.value)
		}
	}
}

// VisitUserValuesAll calls visitor for each existing userValue.
//
// visitor must not retain references to key and value after returning.
// Make key and/or value copies if you need storing them after returning.
func (req *Request) VisitUserValuesAll(visitor func(any, any)) {
	for i, n := 0, len(req.userValues); i < n; i++ {
		kv := &req.userValues[i]
		visitor(kv.key, kv.value)
	}
}

// ResetUserValues allows to reset user values from Request Context.
func (req *Request) ResetUserValues() {
	req.userValues.Reset()
}

// RemoveUserValue removes the given key and the value under it in Request.
func (req *Request) RemoveUserValue(key any) {
	req.userValues.Remove(key)
}

// RemoveUserValueBytes removes the given key and the value under it in Request.
func (req *Request) RemoveUserValueBytes(key []byte) {
	req.userValues.RemoveBytes(key)
}

func getHTTPString(hw httpWriter) string {
	w := bytebufferpool.Get()
	defer bytebufferpool.Put(w)

	bw := bufio.NewWriter(w)
	if err := hw.Write(bw); err != nil {
		return err.Error()
	}
	if err := bw.Flush(); err != nil {
		return err.Error()
	}
	s := string(w.B)
	return s
}

type httpWriter interface {
	Write(w *bufio.Writer) error
}

// BodyWriterTo lets a body stream control whether fasthttp may use WriteTo
// instead of Read when consuming the stream.
//
// Returning false from SupportsBodyWriteTo forces fasthttp to use Read.
// Returning true permits fasthttp to use WriteTo. Existing body-copy paths
// retain their historical io.WriterTo behavior for streams that do not
// implement BodyWriterTo, while direct unknown-size chunked framing uses Read
// for unmarked streams.
//
// SupportsBodyWriteTo must return true only when WriteTo can safely replace
// Read, including any pacing, accounting, transformations, or other observable
// side effects Read performs — emitting the same eventual bytes is not enough.
// A bare io.WriterTo check is avoided for direct chunked framing because a
// WriteTo promoted from an embedded reader would opt in by accident and bypass
// an overridden Read; the bool also lets an embedding type opt back out.
type BodyWriterTo interface {
	io.WriterTo
	SupportsBodyWriteTo() bool
}

type chunkedBodyWriter struct {
	w   *bufio.Writer
	err error
}

func (cw *chunkedBodyWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // an empty chunk marks end-of-stream
	}
	if err := writeChunk(cw.w, p); err != nil {
		cw.err = err
		return 0, err
	}
	return len(p), nil
}

// writeBodyChunked flushes each chunk; the last one stays buffered for the
// trailer section that completes the body.
func writeBodyChunked(w *bufio.Writer, r io.Reader) error {
	// Frame WriteTo output directly, skipping copyBufPool, for bodies whose
	// WriteTo is known to match reading.
	var wt io.WriterTo
	switch v := r.(type) {
	case *bytes.Reader:
		wt = v
	case *bytes.Buffer:
		wt = v
	default:
		if bwt, ok := r.(BodyWriterTo); ok && bwt.SupportsBodyWriteTo() {
			wt = bwt
		}
	}
	if wt != nil {
		cw := chunkedBodyWriter{w: w}
		if _, err := wt.WriteTo(&cw); err != nil {
			return err
		}
		if cw.err != nil {
			return cw.err
		}
		return writeChunkNoFlush(w, nil)
	}

	vbuf := copyBufPool.Get()
	buf := vbuf.([]byte) //nolint:forcetypeassert

	var err error
	var n int
	for {
		n, err = r.Read(buf)
		if n > 0 {
			if writeErr := writeChunk(w, buf[:n]); writeErr != nil {
				err = writeErr
				break
			}
		}
		if err != nil {
			if err == io.EOF {
				err = writeChunkNoFlush(w, nil)
			}
			break
		}
	}

	copyBufPool.Put(vbuf)
	return err
}

func limitedReaderSize(r io.Reader) int64 {
	lr, ok := r.(*io.LimitedReader)
	if !ok {
		return -1
	}
	return lr.N
}

func writeBodyFixedSize(w *bufio.Writer, r io.Reader, size int64, bodyWriter **fixedSizeBodyWriter) error {
	// Keep using a stream's WriterTo when available, but never let it write
	// past the advertised size onto a persistent connection.
	// Reuse the request or response's state to avoid allocating a writer.
	if *bodyWriter == nil {
		*bodyWriter = &fixedSizeBodyWriter{}
	}
	bw := *bodyWriter
	*bw = fixedSizeBodyWriter{w: w, remaining: size}
	defer func() {
		*bw = fixedSizeBodyWriter{}
	}()
	n, err := copyBodyStream(bw, r)
	if bw.overrun && err == nil {
		err = errBodyStreamTooLong
	}

	if n != size && err == nil {
		err = fmt.Errorf("copied %d bytes from body stream instead of %d bytes", n, size)
	}
	return err
}

var errBodyStreamTooLong = errors.New("fasthttp: body stream exceeds content-length")

type fixedSizeBodyWriter struct {
	w             *bufio.Writer
	limitedReader io.LimitedReader
	remaining     int64
	overrunBuf    [1]byte
	overrun       bool
}

func (w *fixedSizeBodyWriter) ReadFrom(r io.Reader) (int64, error) {
	stream := r
	var limited *io.LimitedReader
	if lr, ok := r.(*io.LimitedReader); ok {
		limited = lr
		stream = lr.R
	}
	if _, ok := stream.(*os.File); ok && w.remaining > maxSmallFileSize {
		// An empty output buffer allows ReadFrom to use sendfile for large files.
		if err := w.w.Flush(); err != nil {
			return 0, err
		}
	}
	// Keep a file or socket directly inside one LimitedReader so ReadFrom can
	// use sendfile or splice while bounding the bytes sent to the connection.
	w.limitedReader = io.LimitedReader{R: stream, N: w.remaining}
	if limited != nil {
		w.limitedReader.N = min(w.limitedReader.N, limited.N)
	}
	n, err := w.w.ReadFrom(&w.limitedReader)
	w.remaining -= n
	if limited != nil {
		limited.N -= n
	}
	if err != nil || w.remaining > 0 {
		return n, err
	}
	// A file may have grown since its size was measured. Match SendFile by
	// stopping successfully at the advertised size.
	if _, ok := r.(*os.File); ok {
		return n, nil
	}
	// The bounded copy stops at the body size. Check the original stream for
	// EOF without allowing an extra byte into the output buffer.
	for range 100 {
		nr, readErr := r.Read(w.overrunBuf[:])
		if nr > 0 {
			w.overrun = true
			return n, errBodyStreamTooLong
		}
		if readErr == io.EOF {
			return n, nil
		}
		if readErr != nil {
			return n, readErr
		}
	}
	return n, io.ErrNoProgress
}

func (w *fixedSizeBodyWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.remaining {
		w.overrun = true
		p = p[:int(w.remaining)]
	}
	n, err := w.w.Write(p)
	w.remaining -= int64(n)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	// Flush a full buffer before the copy loop reads more of the body,
	// matching bufio.Writer.ReadFrom's streaming behavior.
	if err == nil && w.w.Available() == 0 {
		err = w.w.Flush()
	}
	if w.overrun && err == nil {
		err = errBodyStreamTooLong
	}
	return n, err
}

func (w *fixedSizeBodyWriter) WriteString(s string) (int, error) {
	return w.Write(s2b(s))
}

func copyBodyStream(w io.Writer, r io.Reader) (int64, error) {
	if bwt, ok := r.(BodyWriterTo); ok {
		if bwt.SupportsBodyWriteTo() {
			return bwt.WriteTo(w)
		}

		vbuf := copyBufPool.Get()
		buf := vbuf.([]byte) //nolint:forcetypeassert
		n, err := copyBuffer(w, r, buf)
		copyBufPool.Put(vbuf)
		return n, err
	}

	return copyZeroAlloc(w, r)
}

// copyZeroAlloc optimizes io.Copy by calling ReadFrom or WriteTo only when
// copying between os.File and net.TCPConn. If the reader has a WriteTo
// method, it uses WriteTo for copying; if the writer has a ReadFrom method,
// it uses ReadFrom for copying. If neither method is available, it gets a
// buffer from sync.Pool to perform the copy.
//
// io.CopyBuffer always uses the WriterTo or ReadFrom interface if it's
// available. however, os.File and net.TCPConn unfortunately have a
// fallback in their WriterTo that calls io.Copy if sendfile isn't possible.
//
// See issue: https://github.com/valyala/fasthttp/issues/1889
//
// sendfile can only be triggered when copying between os.File and net.TCPConn.
// Since the function confirming zero-copy is a private function, we use
// ReadFrom only in this specific scenario. For all other cases, we prioritize
// using our own copyBuffer method.
//
// o: our copyBuffer
// r: readFrom
// w: writeTo
//
// write\read *File  *TCPConn  writeTo  other
// *File        o       r         w       o
// *TCPConn    w,r      o         w       o
// readFrom     r       r         w       r
// other        o       o         w       o
//
//nolint:dupword
func copyZeroAlloc(w io.Writer, r io.Reader) (int64, error) {
	var readerIsFile, readerIsConn bool

	switch r := r.(type) {
	case *os.File:
		readerIsFile = true
	case *net.TCPConn:
		readerIsConn = true
	case io.WriterTo:
		return r.WriteTo(w)
	}

	switch w := w.(type) {
	case *os.File:
		if readerIsConn {
			return w.ReadFrom(r)
		}
	case *net.TCPConn:
		if readerIsFile {
			// Benchmark tests show that on Windows, WriteTo performs
			// significantly better than ReadFrom. On Linux, however,
			// ReadFrom slightly outperforms WriteTo. When possible,
			// copyZeroAlloc aims to perform  better than or as well
			// as io.Copy, so we use WriteTo whenever possible for
			// optimal performance.
			if rt, ok := r.(io.WriterTo); ok {
				return rt.WriteTo(w)
			}
			return w.ReadFrom(r)
		}
	case io.ReaderFrom:
		return w.ReadFrom(r)
	}

	vbuf := copyBufPool.Get()
	buf := vbuf.([]byte) //nolint:forcetypeassert
	n, err := copyBuffer(w, r, buf)
	copyBufPool.Put(vbuf)
	return n, err
}

// copyBuffer is rewritten from io.copyBuffer. We do not check if src has a
// WriteTo method, if dst has a ReadFrom method, or if buf is empty.
func copyBuffer(dst io.Writer, src io.Reader, buf []byte) (written int64, err error) {
	for {
		nr, er := src.Read(buf)
		if nr > 0 {
			nw, ew := dst.Write(buf[0:nr])
			if nw < 0 || nr < nw {
				nw = 0
				if ew == nil {
					ew = errors.New("invalid write result")
				}
			}
			written += int64(nw)
			if ew != nil {
				err = ew
				break
			}
			if nr != nw {
				err = io.ErrShortWrite
				break
			}
		}
		if er != nil {
			if er != io.EOF {
				err = er
			}
			break
		}
	}
	return written, err
}

var copyBufPool = sync.Pool{
	New: func() any {
		return make([]byte, 4096)
	},
}

func writeChunk(w *bufio.Writer, b []byte) error {
	if err := writeChunkNoFlush(w, b); err != nil {
		return err
	}
	return w.Flush()
}

func writeChunkNoFlush(w *bufio.Writer, b []byte) error {
	n := len(b)
	if err := writeHexInt(w, n); err != nil {
		return err
	}
	if _, err := w.Write(strCRLF); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	// If is end chunk, write CRLF after writing trailer
	if n > 0 {
		if _, err := w.Write(strCRLF); err != nil {
			return err
		}
	}
	return nil
}

func writeBufferedBodyChunked(w *bufio.Writer, body []byte) error {
	if len(body) > 0 {
		if err := writeChunkNoFlush(w, body); err != nil {
			return err
		}
	}
	return writeChunkNoFlush(w, nil)
}

// ErrBodyTooLarge is returned if either request or response body exceeds
// the given limit.
var ErrBodyTooLarge = errors.New("fasthttp: body size exceeds the given limit")

func copyZeroAllocWithLimit(w io.Writer, r io.Reader, maxBodySize int) (int64, error) {
	if maxBodySize <= 0 {
		return copyZeroAlloc(w, r)
	}

	lr := &io.LimitedReader{
		R: r,
		N: int64(maxBodySize) + 1,
	}
	n, err := copyZeroAlloc(w, lr)
	if err != nil {
		return n, err
	}
	if lr.N <= 0 {
		return n, ErrBodyTooLarge
	}
	return n, nil
}

func readBody(r *bufio.Reader, contentLength, maxBodySize int, dst []byte) ([]byte, error) {
	if maxBodySize > 0 && contentLength > maxBodySize {
		return dst, ErrBodyTooLarge
	}
	return appendBodyFixedSize(r, dst, contentLength)
}

var errChunkedStream = errors.New("chunked stream")

func readBodyWithStreaming(r *bufio.Reader, contentLength, maxBodySize int, dst []byte) (b []byte, err error) {
	if contentLength == -1 {
		// handled in requestStream.Read()
		return b, errChunkedStream
	}

	dst = dst[:0]

	readN := min(maxBodySize, contentLength)
	readN = min(readN, 8*1024)

	// A fixed-length pre-read function should be used here; otherwise,
	// it may read content beyond the request body into areas outside
	// the br buffer. This could affect the handling of the next request
	// in the br buffer, if there is one. The original two branches can
	// be handled with this single branch. by the way,
	// fix issue: https://github.com/valyala/fasthttp/issues/1816
	b, err = appendBodyFixedSize(r, dst, readN)
	if err != nil {
		return b, err
	}
	if contentLength > maxBodySize {
		return b, ErrBodyTooLarge
	}
	return b, nil
}

func readBodyIdentity(r *bufio.Reader, maxBodySize int, dst []byte) ([]byte, error) {
	dst = dst[:cap(dst)]
	if len(dst) == 0 {
		dst = make([]byte, 1024)
	}
	offset := 0
	for {
		nn, err := r.Read(dst[offset:])
		if nn <= 0 {
			switch {
			case errors.Is(err, io.EOF):
				return dst[:offset], nil
			case err != nil:
				return dst[:offset], err
			default:
				return dst[:offset], fmt.Errorf("bufio read returned (%d, nil)", nn)
			}
		}
		offset += nn
		if maxBodySize > 0 && offset > maxBodySize {
			return dst[:offset], ErrBodyTooLarge
		}
		if len(dst) == offset {
			n := roundUpForSliceCap(2 * offset)
			if maxBodySize > 0 && n > maxBodySize {
				n = maxBodySize + 1
			}
			b := make([]byte, n)
			copy(b, dst)
			dst = b
		}
	}
}

func appendBodyFixedSize(r *bufio.Reader, dst []byte, n int) ([]byte, error) {
	if n == 0 {
		return dst, nil
	}

	offset := len(dst)
	dstLen := offset + n
	if cap(dst) < dstLen {
		b := make([]byte, roundUpForSliceCap(dstLen))
		copy(b, dst)
		dst = b
	}
	dst = dst[:dstLen]

	for {
		nn, err := r.Read(dst[offset:])
		if nn <= 0 {
			switch {
			case errors.Is(err, io.EOF):
				return dst[:offset], io.ErrUnexpectedEOF
			case err != nil:
				return dst[:offset], err
			default:
				return dst[:offset], fmt.Errorf("bufio read returned (%d, nil)", nn)
			}
		}
		offset += nn
		if offset == dstLen {
			return dst, nil
		}
	}
}

// ErrBrokenChunk is returned when server receives a broken chunked body (Transfer-Encoding: chunked).
type ErrBrokenChunk struct {
	error
}

func readBodyChunked(r *bufio.Reader, maxBodySize int, dst []byte) ([]byte, error) {
	if len(dst) > 0 {
		// data integrity might be in danger. No idea what we received,
		// but nothing we should write to.
		panic("BUG: expected zero-length buffer")
	}

	strCRLFLen := len(strCRLF)
	var excess int
	for {
		chunkSize, err := parseChunkSize(r, &excess)
		if err != nil {
			return dst, err
		}
		if chunkSize == 0 {
			return dst, err
		}
		if maxBodySize > 0 && len(dst)+chunkSize > maxBodySize {
			return dst, ErrBodyTooLarge
		}
		dst, err = appendBodyFixedSize(r, dst, chunkSize+strCRLFLen)
		if err != nil {
			return dst, err
		}
		if !bytes.Equal(dst[len(dst)-strCRLFLen:], strCRLF) {
			return dst, ErrBrokenChunk{
				error: errors.New("cannot find crlf at the end of chunk"),
			}
		}
		dst = dst[:len(dst)-strCRLFLen]
	}
}

// Limit both a single unterminated chunk extension and the cumulative overhead
// of many small chunks. As in net/http, allow 16 bytes per chunk plus twice
// the chunk size before charging the body-wide allowance.
const maxChunkOverhead = 16 * 1024

func parseChunkSize(r *bufio.Reader, excess *int) (int, error) {
	n, err := readHexInt(r)
	if err != nil {
		return -1, err
	}
	if b, _ := r.Peek(min(2, r.Buffered())); len(b) == 2 && b[0] == '\r' && b[1] == '\n' {
		_, _ = r.Discard(2)
		*excess = max(0, *excess-16-2*n)
		return n, nil
	}
	inExt := false
	afterSizeOWS := false
	extra := 0
	for {
		c, err := r.ReadByte()
		if err != nil {
			return -1, ErrBrokenChunk{
				error: fmt.Errorf("cannot read '\\r' char at the end of chunk size: %w", err),
			}
		}
		if c == '\r' {
			if err := r.UnreadByte(); err != nil {
				return -1, ErrBrokenChunk{
					error: fmt.Errorf("cannot unread '\\r' char at the end of chunk size: %w", err),
				}
			}
			break
		}
		// Security: Don't allow newlines in chunk extensions.
		// This can lead to request smuggling issues with some reverse proxies.
		if c == '\n' {
			return -1, ErrBrokenChunk{
				error: errors.New("invalid character '\\n' after chunk size"),
			}
		}
		extra++
		if extra > maxChunkOverhead {
			return -1, ErrBrokenChunk{error: errors.New("chunk size line too long")}
		}
		if inExt {
			continue
		}
		switch c {
		case ' ', '\t':
			afterSizeOWS = true
			continue
		case ';':
			if afterSizeOWS {
				return -1, ErrBrokenChunk{
					error: fmt.Errorf("invalid character %q after chunk size", c),
				}
			}
			inExt = true
			continue
		default:
			return -1, ErrBrokenChunk{
				error: fmt.Errorf("invalid character %q after chunk size", c),
			}
		}
	}
	err = readCrLf(r)
	if err != nil {
		return -1, err
	}
	*excess = max(0, *excess+extra-16-2*n)
	if *excess > maxChunkOverhead {
		return -1, ErrBrokenChunk{error: errors.New("too much chunk extension overhead")}
	}
	return n, nil
}

func readCrLf(r *bufio.Reader) error {
	for _, exp := range []byte{'\r', '\n'} {
		c, err := r.ReadByte()
		if err != nil {
			return ErrBrokenChunk{
				error: fmt.Errorf("cannot read %q char at the end of chunk size: %w", exp, err),
			}
		}
		if c != exp {
			return ErrBrokenChunk{
				error: fmt.Errorf("unexpected char %q at the end of chunk size: expected %q", c, exp),
			}
		}
	}
	return nil
}

// SetTimeout sets timeout for the request.
//
// If the client has ReadTimeout or WriteTimeout set, the shorter timeout applies.
//
// The following code:
//
//	req.SetTimeout(t)
//	c.Do(&req, &resp)
//
// is equivalent to
//
//	c.DoTimeout(&req, &resp, t)
func (req *Request) SetTimeout(t time.Duration) {
	req.timeout = t
}
