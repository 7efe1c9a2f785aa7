package http1

import "bytes"

// MaxHeaders bounds the header lines of a request or response the parser indexes; a message
// with more is refused (431 ErrTooManyHeaders for a request, a malformed answer for a
// response). Generous: nginx and Envoy bound the head's bytes, not its lines (Envoy's
// default is 100 lines), and the head's bytes stay bounded by the caller's maxHead. Each
// index costs 16 bytes a line, per connection.
const MaxHeaders = 256

// Span is a [Start, End) range into a message buffer: the parser records offsets, not
// slices, so that an index stays valid when the buffer is moved.
type Span struct{ Start, End uint32 }

// Of is the Span's bytes in buf.
func (s Span) Of(buf []byte) []byte { return buf[s.Start:s.End] }

// Field is one header line: name and value (trimmed) as spans of the buffer.
type Field struct{ Name, Value Span }

// Request is one parsed HTTP/1.1 request: views into the connection's read buffer (the body
// may instead be the decoded chunked body), valid until the exchange ends.
type Request struct {
	buf     []byte // the request's bytes, head and body as received
	method  Span
	target  Span // request target as sent (path and query)
	path    Span // target without the query
	headers [MaxHeaders]Field
	nhdr    int
	body    []byte
	// keepAlive is false after "Connection: close" or for HTTP/1.0 without keep-alive.
	keepAlive      bool
	expectContinue bool
	chunked        bool
	contentLength  int
	// need is the request's whole size once its head says (Content-Length); 0 before.
	need int
	// headLen is the size of the head (the body starts there) once it has been parsed.
	headLen int
	// http11 is set for an HTTP/1.1 request; hosts counts its Host header lines.
	http11 bool
	hosts  int
}

// Method is the request method.
func (r *Request) Method() []byte { return r.method.Of(r.buf) }

// Path is the request target without its query string.
func (r *Request) Path() []byte { return r.path.Of(r.buf) }

// Target is the request target as the client sent it (path and query).
func (r *Request) Target() []byte { return r.target.Of(r.buf) }

// Body is the request body (decoded when the client sent it chunked).
func (r *Request) Body() []byte { return r.body }

// KeepAlive reports whether the client keeps the connection open after this request.
func (r *Request) KeepAlive() bool { return r.keepAlive }

// Header returns the value of the first header named name (ASCII case-insensitive), or nil.
func (r *Request) Header(name string) []byte {
	for i := range r.nhdr {
		if FoldEqual(r.headers[i].Name.Of(r.buf), name) {
			return r.headers[i].Value.Of(r.buf)
		}
	}
	return nil
}

// VisitHeaders calls f for every header line in order.
func (r *Request) VisitHeaders(f func(name, value []byte)) {
	for i := range r.nhdr {
		f(r.headers[i].Name.Of(r.buf), r.headers[i].Value.Of(r.buf))
	}
}

// Error is a request the server refuses: Status is the HTTP status to answer with (400, 413,
// 431, 501), after which the connection is closed.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// The refusals, by cause.
var (
	ErrHeaderTooLarge = &Error{431, "request header block larger than the server's limit in bytes"}
	ErrTooManyHeaders = &Error{431, "more than 256 header lines (the server's fixed limit on lines)"}
	ErrBodyTooLarge   = &Error{413, "request body too large"}
	ErrBadRequestLine = &Error{400, "malformed request line"}
	ErrBadHeader      = &Error{400, "malformed header line"}
	ErrBadLength      = &Error{400, "malformed or conflicting Content-Length"}
	ErrBadChunk       = &Error{400, "malformed chunked body"}
	ErrBadEncoding    = &Error{501, "unsupported Transfer-Encoding (only chunked)"}
	// ErrBadFraming refuses a request that declares both lengths: RFC 9112 §6.3 lets a server
	// read it one way where a proxy in front read it the other (request smuggling).
	ErrBadFraming = &Error{400, "both Content-Length and Transfer-Encoding"}
	// ErrBadHost refuses more than one Host line, or none on HTTP/1.1 (RFC 9112 §3.2).
	ErrBadHost = &Error{400, "an HTTP/1.1 request needs exactly one Host header"}
	// ErrBareLF refuses a line ended by LF alone: RFC 9112 §2.2 allows it, but a server
	// that accepts it reads a head another hop may frame differently.
	ErrBareLF = &Error{400, "a line ends in LF without CR"}
)

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

// ParseRequest parses the request at the start of buf. It returns the bytes the request
// occupies, or 0 and no error while buf holds only part of it. A chunked body is decoded into
// *scratch. maxHead and maxBody bound the head and the body.
func ParseRequest(buf []byte, r *Request, scratch *[]byte, maxHead, maxBody int) (int, error) {
	r.reset(buf)
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		if len(buf) > maxHead {
			return 0, ErrHeaderTooLarge
		}
		if hasBareLF(buf) {
			return 0, ErrBareLF // answered now: the CRLFCRLF it waits for may never come
		}
		return 0, nil
	}
	if end > maxHead {
		return 0, ErrHeaderTooLarge
	}
	line := bytes.IndexByte(buf[:end+2], '\n') - 1 // end of the request line (its CR)
	if line < 0 || buf[line] != '\r' {
		return 0, ErrBadRequestLine
	}
	if err := r.parseRequestLine(buf[:line]); err != nil {
		return 0, err
	}
	if err := ParseHeaders(buf, line+2, end, &r.headers, &r.nhdr); err != nil {
		return 0, err
	}
	if err := r.framing(); err != nil {
		return 0, err
	}
	bodyStart := end + 4
	r.headLen = bodyStart
	if r.chunked {
		n, body, err := decodeChunkedBody(buf[bodyStart:], (*scratch)[:0], maxBody)
		*scratch = body
		if err != nil || n == 0 {
			return 0, err
		}
		r.body, r.contentLength = body, len(body)
		r.buf = buf[:bodyStart+n]
		return bodyStart + n, nil
	}
	if r.contentLength < 0 {
		r.contentLength = 0
	}
	if r.contentLength > maxBody {
		return 0, ErrBodyTooLarge
	}
	r.need = bodyStart + r.contentLength
	if len(buf)-bodyStart < r.contentLength {
		return 0, nil
	}
	n := bodyStart + r.contentLength
	r.body, r.buf = buf[bodyStart:n], buf[:n]
	return n, nil
}

// framing reads the headers the request's framing and connection depend on (Host, Expect,
// Connection, Content-Length, Transfer-Encoding) and rejects the combinations RFC 9112 makes
// an error: a length with chunked, two different lengths, two Host headers.
func (r *Request) framing() error {
	for i := range r.nhdr {
		name, value := r.headers[i].Name.Of(r.buf), r.headers[i].Value.Of(r.buf)
		switch len(name) {
		case 4:
			if EqualFold(name, "host") {
				r.hosts++
			}
		case 6:
			if EqualFold(name, "expect") {
				r.expectContinue = EqualFold(value, "100-continue")
			}
		case 10:
			if EqualFold(name, "connection") {
				if ContainsTokenFold(value, "close") {
					r.keepAlive = false
				} else if ContainsTokenFold(value, "keep-alive") {
					r.keepAlive = true
				}
			}
		case 14:
			if EqualFold(name, "content-length") {
				n, ok := ParseDecimal(value)
				if !ok || (r.contentLength >= 0 && r.contentLength != n) {
					return ErrBadLength
				}
				r.contentLength = n
			}
		case 17:
			if EqualFold(name, "transfer-encoding") {
				if !EqualFold(value, "chunked") {
					return ErrBadEncoding
				}
				r.chunked = true
			}
		}
	}
	if r.chunked && r.contentLength >= 0 {
		return ErrBadFraming
	}
	if r.hosts > 1 {
		return ErrBadHost
	}
	return nil
}

// reset readies r for buf. The header index is not cleared: nhdr bounds what is read of it,
// and clearing MaxHeaders fields on every parse (each partial read too) costs the hot path.
func (r *Request) reset(buf []byte) {
	r.buf, r.method, r.target, r.path, r.nhdr, r.body = buf, Span{}, Span{}, Span{}, 0, nil
	r.keepAlive, r.expectContinue, r.chunked, r.http11 = false, false, false, false
	r.contentLength, r.need, r.headLen, r.hosts = -1, 0, 0, 0
}

// hasBareLF reports whether buf holds an LF not preceded by CR.
func hasBareLF(buf []byte) bool {
	for i := 0; i < len(buf); {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return false
		}
		i += j
		if i == 0 || buf[i-1] != '\r' {
			return true
		}
		i++
	}
	return false
}

// MissingHost reports an HTTP/1.1 request without a Host header, which a server must refuse
// (RFC 9112 §3.2; ErrBadHost). ParseRequest does not refuse it itself: the mock engines
// serve clients that omit it.
func (r *Request) MissingHost() bool { return r.http11 && r.hosts == 0 }

// parseRequestLine reads "METHOD target HTTP/1.x" and sets the keep-alive default.
func (r *Request) parseRequestLine(line []byte) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return ErrBadRequestLine
	}
	sp2 := bytes.IndexByte(line[sp1+1:], ' ')
	if sp2 <= 0 {
		return ErrBadRequestLine
	}
	sp2 += sp1 + 1
	for _, c := range line[:sp1] {
		if !IsToken(c) {
			return ErrBadRequestLine
		}
	}
	for _, c := range line[sp1+1 : sp2] {
		if c <= ' ' || c == 0x7f {
			return ErrBadRequestLine
		}
	}
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
		r.keepAlive, r.http11 = true, true
	case "HTTP/1.0":
		r.keepAlive = false
	default:
		return ErrBadRequestLine
	}
	r.method = Span{0, uint32(sp1)}
	r.target = Span{uint32(sp1 + 1), uint32(sp2)}
	start, end := sp1+1, sp2
	target := line[start:end]
	// Absolute form (RFC 9112 §3.2.2): the path starts at the first slash after the authority.
	if bytes.HasPrefix(target, []byte("http://")) || bytes.HasPrefix(target, []byte("https://")) {
		scheme := bytes.Index(target, []byte("//")) + 2
		slash := bytes.IndexByte(target[scheme:], '/')
		if slash < 0 {
			return ErrBadRequestLine // no path: nothing this server serves
		}
		start += scheme + slash
		r.target.Start = uint32(start)
		target = line[start:end]
	}
	if q := bytes.IndexByte(target, '?'); q >= 0 {
		end = start + q
	}
	r.path = Span{uint32(start), uint32(end)}
	return nil
}

// ParseHeaders indexes the header lines of buf[from:end] (each ending in CRLF but the last,
// which ends at end) into hs[*n:], counting them in *n: a request's or a response's head.
func ParseHeaders(buf []byte, from, end int, hs *[MaxHeaders]Field, n *int) error {
	pos := from
	for pos < end {
		eol := bytes.Index(buf[pos:end+2], crlf)
		if eol < 0 {
			return ErrBadHeader
		}
		eol += pos
		colon := bytes.IndexByte(buf[pos:eol], ':')
		if colon <= 0 {
			return ErrBadHeader
		}
		colon += pos
		for _, c := range buf[pos:colon] {
			if !IsToken(c) {
				return ErrBadHeader // also refuses whitespace before the colon (RFC 9112 §5.1)
			}
		}
		vs, ve := colon+1, eol
		for vs < ve && (buf[vs] == ' ' || buf[vs] == '\t') {
			vs++
		}
		for ve > vs && (buf[ve-1] == ' ' || buf[ve-1] == '\t') {
			ve--
		}
		for _, c := range buf[vs:ve] {
			if c < ' ' && c != '\t' || c == 0x7f {
				return ErrBadHeader // CR, LF, NUL and other controls inside a value
			}
		}
		if *n == MaxHeaders {
			return ErrTooManyHeaders
		}
		hs[*n] = Field{Span{uint32(pos), uint32(colon)}, Span{uint32(vs), uint32(ve)}}
		*n++
		pos = eol + 2
	}
	return nil
}

// decodeChunkedBody decodes a chunked body from buf into dst. It returns the bytes consumed
// (0 while buf holds only part of the body), the decoded body and any error. Trailers are
// skipped.
func decodeChunkedBody(buf, dst []byte, maxBody int) (int, []byte, error) {
	pos := 0
	for {
		i := bytes.Index(buf[pos:], crlf)
		if i < 0 {
			if len(buf)-pos > 1024 {
				return 0, dst, ErrBadChunk
			}
			return 0, dst, nil
		}
		sizeField := buf[pos : pos+i]
		if semi := bytes.IndexByte(sizeField, ';'); semi >= 0 {
			sizeField = sizeField[:semi]
		}
		size, ok := ParseHex(bytes.TrimSpace(sizeField))
		if !ok {
			return 0, dst, ErrBadChunk
		}
		pos += i + 2
		if size == 0 {
			for { // trailer section: header lines up to an empty line
				j := bytes.Index(buf[pos:], crlf)
				if j < 0 {
					return 0, dst, nil
				}
				pos += j + 2
				if j == 0 {
					return pos, dst, nil
				}
			}
		}
		if len(dst)+size > maxBody {
			return 0, dst, ErrBodyTooLarge
		}
		if len(buf)-pos < size+2 {
			return 0, dst, nil
		}
		if !bytes.Equal(buf[pos+size:pos+size+2], crlf) {
			return 0, dst, ErrBadChunk
		}
		dst = append(dst, buf[pos:pos+size]...)
		pos += size + 2
	}
}

// ParseDecimal parses a non-negative decimal of at most 18 digits.
func ParseDecimal(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// ParseHex parses a chunk size of at most 15 hex digits.
func ParseHex(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// EqualFold compares b with the lower-case ASCII string s, ignoring the case of b.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// FoldEqual compares b and s ignoring ASCII case on both sides.
func FoldEqual[S []byte | string](b []byte, s S) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		cb, cs := b[i], s[i]
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if 'A' <= cs && cs <= 'Z' {
			cs += 'a' - 'A'
		}
		if cb != cs {
			return false
		}
	}
	return true
}

// ContainsTokenFold reports whether the comma-separated list v holds token (lower case).
func ContainsTokenFold(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte(","))
		if EqualFold(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}

// IsToken reports whether c may appear in a method or header name (RFC 9110 §5.6.2).
func IsToken(c byte) bool {
	return c < 0x80 && tokenTable[c]
}

var tokenTable = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// Peek is Header under the name fasthttp's request header gives it.
func (r *Request) Peek(name string) []byte { return r.Header(name) }

// ExpectContinue reports whether the client sent "Expect: 100-continue" (and, while the body
// has not arrived, waits for it).
func (r *Request) ExpectContinue() bool { return r.expectContinue }

// Need is the request's whole size in bytes once its head declared a Content-Length (a
// buffer that must grow grows to it), else 0.
func (r *Request) Need() int { return r.need }

// HeadLen is the size of the request's head, where its body starts: 0 until the whole head
// has arrived. While ParseRequest reports the request incomplete, the head's views (method,
// target, headers, Chunked, ContentLength) are already valid once HeadLen is positive.
func (r *Request) HeadLen() int { return r.headLen }

// Chunked reports whether the body is sent chunked.
func (r *Request) Chunked() bool { return r.chunked }

// ContentLength is the body's declared length (with a complete chunked body, its decoded
// length); meaningful once HeadLen is positive.
func (r *Request) ContentLength() int { return r.contentLength }

// SetBody makes b the request's body: a server that serves a request before its body has
// arrived whole (a streamed body) sets the part it has.
func (r *Request) SetBody(b []byte) { r.body = b }

// NumHeaders is the number of header lines; HeaderName and HeaderValue are the i-th.
func (r *Request) NumHeaders() int { return r.nhdr }

// HeaderName is the name of the i-th header line, as sent.
func (r *Request) HeaderName(i int) []byte { return r.headers[i].Name.Of(r.buf) }

// HeaderValue is the value of the i-th header line, trimmed.
func (r *Request) HeaderValue(i int) []byte { return r.headers[i].Value.Of(r.buf) }
