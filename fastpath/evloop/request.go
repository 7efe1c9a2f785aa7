package evloop

import "bytes"

// maxHeaders bounds the header lines of a request or response the parser indexes; a message
// with more is refused (431 for a request, a malformed answer for a response).
const maxHeaders = 64

// span is a [start, end) range into a message buffer: the parser records offsets, not slices,
// so that an index stays valid when the buffer is moved.
type span struct{ start, end uint32 }

func (s span) of(buf []byte) []byte { return buf[s.start:s.end] }

// headerField is one header line: name and value (trimmed) as spans of the buffer.
type headerField struct{ name, value span }

// Request is one parsed HTTP/1.1 request: views into the connection's read buffer (the body
// may instead be the decoded chunked body), valid until the exchange ends.
type Request struct {
	buf     []byte // the request's bytes, head and body as received
	method  span
	target  span // request target as sent (path and query)
	path    span // target without the query
	headers [maxHeaders]headerField
	nhdr    int
	body    []byte
	// keepAlive is false after "Connection: close" or for HTTP/1.0 without keep-alive.
	keepAlive      bool
	expectContinue bool
	chunked        bool
	contentLength  int
	// need is the request's whole size once its head says (Content-Length); 0 before.
	need int
}

// Method is the request method.
func (r *Request) Method() []byte { return r.method.of(r.buf) }

// Path is the request target without its query string.
func (r *Request) Path() []byte { return r.path.of(r.buf) }

// Target is the request target as the client sent it (path and query).
func (r *Request) Target() []byte { return r.target.of(r.buf) }

// Body is the request body (decoded when the client sent it chunked).
func (r *Request) Body() []byte { return r.body }

// KeepAlive reports whether the client keeps the connection open after this request.
func (r *Request) KeepAlive() bool { return r.keepAlive }

// Header returns the value of the first header named name (ASCII case-insensitive), or nil.
func (r *Request) Header(name string) []byte {
	for i := range r.nhdr {
		if foldEqual(r.headers[i].name.of(r.buf), name) {
			return r.headers[i].value.of(r.buf)
		}
	}
	return nil
}

// VisitHeaders calls f for every header line in order.
func (r *Request) VisitHeaders(f func(name, value []byte)) {
	for i := range r.nhdr {
		f(r.headers[i].name.of(r.buf), r.headers[i].value.of(r.buf))
	}
}

// ParseError is a request the server refuses: Status is the HTTP status to answer with
// (400, 413, 431, 501), after which the connection is closed.
type ParseError struct {
	Status int
	Reason string
}

func (e *ParseError) Error() string { return e.Reason }

var (
	errHeaderTooLarge = &ParseError{431, "request header too large"}
	errTooManyHeaders = &ParseError{431, "too many header lines"}
	errBodyTooLarge   = &ParseError{413, "request body too large"}
	errBadRequestLine = &ParseError{400, "malformed request line"}
	errBadHeader      = &ParseError{400, "malformed header line"}
	errBadLength      = &ParseError{400, "malformed or conflicting Content-Length"}
	errBadChunk       = &ParseError{400, "malformed chunked body"}
	errBadEncoding    = &ParseError{501, "unsupported Transfer-Encoding (only chunked)"}
	errBodyMemory     = &ParseError{503, "request body memory exhausted"}
)

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

// parseRequest parses the request at the start of buf. It returns the bytes the request
// occupies, or 0 and no error while buf holds only part of it. A chunked body is decoded into
// *scratch. maxHead and maxBody bound the head and the body.
func parseRequest(buf []byte, r *Request, scratch *[]byte, maxHead, maxBody int) (int, error) {
	*r = Request{buf: buf, contentLength: -1}
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		if len(buf) > maxHead {
			return 0, errHeaderTooLarge
		}
		return 0, nil
	}
	if end > maxHead {
		return 0, errHeaderTooLarge
	}
	line := bytes.IndexByte(buf[:end+2], '\n') - 1 // end of the request line (its CR)
	if line < 0 || buf[line] != '\r' {
		return 0, errBadRequestLine
	}
	if err := r.parseRequestLine(buf[:line]); err != nil {
		return 0, err
	}
	if err := parseHeaders(buf, line+2, end, &r.headers, &r.nhdr); err != nil {
		return 0, err
	}
	for i := range r.nhdr {
		name, value := r.headers[i].name.of(buf), r.headers[i].value.of(buf)
		switch len(name) {
		case 6:
			if equalFold(name, "expect") {
				r.expectContinue = equalFold(value, "100-continue")
			}
		case 10:
			if equalFold(name, "connection") {
				if containsTokenFold(value, "close") {
					r.keepAlive = false
				} else if containsTokenFold(value, "keep-alive") {
					r.keepAlive = true
				}
			}
		case 14:
			if equalFold(name, "content-length") {
				n, ok := parseDecimal(value)
				if !ok || (r.contentLength >= 0 && r.contentLength != n) {
					return 0, errBadLength
				}
				r.contentLength = n
			}
		case 17:
			if equalFold(name, "transfer-encoding") {
				if !equalFold(value, "chunked") {
					return 0, errBadEncoding
				}
				r.chunked = true
			}
		}
	}
	bodyStart := end + 4
	if r.chunked {
		// RFC 9112 §6.3: Transfer-Encoding overrides Content-Length.
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
		return 0, errBodyTooLarge
	}
	r.need = bodyStart + r.contentLength
	if len(buf)-bodyStart < r.contentLength {
		return 0, nil
	}
	n := bodyStart + r.contentLength
	r.body, r.buf = buf[bodyStart:n], buf[:n]
	return n, nil
}

// parseRequestLine reads "METHOD target HTTP/1.x" and sets the keep-alive default.
func (r *Request) parseRequestLine(line []byte) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return errBadRequestLine
	}
	sp2 := bytes.IndexByte(line[sp1+1:], ' ')
	if sp2 <= 0 {
		return errBadRequestLine
	}
	sp2 += sp1 + 1
	for _, c := range line[:sp1] {
		if !isToken(c) {
			return errBadRequestLine
		}
	}
	for _, c := range line[sp1+1 : sp2] {
		if c <= ' ' || c == 0x7f {
			return errBadRequestLine
		}
	}
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
		r.keepAlive = true
	case "HTTP/1.0":
		r.keepAlive = false
	default:
		return errBadRequestLine
	}
	r.method = span{0, uint32(sp1)}
	r.target = span{uint32(sp1 + 1), uint32(sp2)}
	start, end := sp1+1, sp2
	target := line[start:end]
	// Absolute form (RFC 9112 §3.2.2): the path starts at the first slash after the authority.
	if bytes.HasPrefix(target, []byte("http://")) || bytes.HasPrefix(target, []byte("https://")) {
		scheme := bytes.Index(target, []byte("//")) + 2
		slash := bytes.IndexByte(target[scheme:], '/')
		if slash < 0 {
			return errBadRequestLine // no path: nothing this server serves
		}
		start += scheme + slash
		r.target.start = uint32(start)
		target = line[start:end]
	}
	if q := bytes.IndexByte(target, '?'); q >= 0 {
		end = start + q
	}
	r.path = span{uint32(start), uint32(end)}
	return nil
}

// parseHeaders indexes the header lines of buf[from:end] (each ending in CRLF but the last,
// which ends at end).
func parseHeaders(buf []byte, from, end int, hs *[maxHeaders]headerField, n *int) error {
	pos := from
	for pos < end {
		eol := bytes.Index(buf[pos:end+2], crlf)
		if eol < 0 {
			return errBadHeader
		}
		eol += pos
		colon := bytes.IndexByte(buf[pos:eol], ':')
		if colon <= 0 {
			return errBadHeader
		}
		colon += pos
		for _, c := range buf[pos:colon] {
			if !isToken(c) {
				return errBadHeader // also refuses whitespace before the colon (RFC 9112 §5.1)
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
				return errBadHeader // CR, LF, NUL and other controls inside a value
			}
		}
		if *n == maxHeaders {
			return errTooManyHeaders
		}
		hs[*n] = headerField{span{uint32(pos), uint32(colon)}, span{uint32(vs), uint32(ve)}}
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
				return 0, dst, errBadChunk
			}
			return 0, dst, nil
		}
		sizeField := buf[pos : pos+i]
		if semi := bytes.IndexByte(sizeField, ';'); semi >= 0 {
			sizeField = sizeField[:semi]
		}
		size, ok := parseHex(bytes.TrimSpace(sizeField))
		if !ok {
			return 0, dst, errBadChunk
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
			return 0, dst, errBodyTooLarge
		}
		if len(buf)-pos < size+2 {
			return 0, dst, nil
		}
		if !bytes.Equal(buf[pos+size:pos+size+2], crlf) {
			return 0, dst, errBadChunk
		}
		dst = append(dst, buf[pos:pos+size]...)
		pos += size + 2
	}
}

// parseDecimal parses a non-negative decimal of at most 18 digits.
func parseDecimal(b []byte) (int, bool) {
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

// parseHex parses a chunk size of at most 15 hex digits.
func parseHex(b []byte) (int, bool) {
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

// equalFold compares b with the lower-case ASCII string s, ignoring the case of b.
func equalFold(b []byte, s string) bool {
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

// foldEqual compares b and s ignoring ASCII case on both sides.
func foldEqual[S []byte | string](b []byte, s S) bool {
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

// containsTokenFold reports whether the comma-separated list v holds token (lower case).
func containsTokenFold(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte(","))
		if equalFold(bytes.TrimSpace(item), token) {
			return true
		}
	}
	return false
}

// isToken reports whether c may appear in a method or header name (RFC 9110 §5.6.2).
func isToken(c byte) bool {
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
