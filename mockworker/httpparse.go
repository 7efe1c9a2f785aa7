package mockworker

import "bytes"

// httpRequest is one HTTP/1.1 request parsed by parseHTTPRequest: views into the read buffer
// (body may instead alias the chunked-body scratch), valid until that buffer is discarded.
type httpRequest struct {
	method    []byte
	path      []byte // request target without the query string
	body      []byte
	requestID []byte
	fault     []byte
	// keepAlive is false after "Connection: close" or an HTTP/1.0 request without
	// "Connection: keep-alive".
	keepAlive bool
	// expectContinue: the client sent "Expect: 100-continue" and waits for it before the body.
	expectContinue bool
}

// Limits of the gnet server's parser; a request beyond them is refused and the connection closed.
const (
	maxHeaderBytes = 64 << 10
	maxBodyBytes   = 64 << 20
)

// Parse errors, answered with the status in parseError.status and a closed connection.
type parseError struct {
	status int
	msg    string
}

func (e *parseError) Error() string { return e.msg }

var (
	errHeaderTooLarge = &parseError{431, "request header exceeds 64 KiB"}
	errBodyTooLarge   = &parseError{413, "request body exceeds 64 MiB"}
	errBadRequestLine = &parseError{400, "malformed request line"}
	errBadHeader      = &parseError{400, "malformed header line"}
	errBadLength      = &parseError{400, "malformed or conflicting Content-Length"}
	errBadChunk       = &parseError{400, "malformed chunked body"}
	errBadEncoding    = &parseError{501, "unsupported Transfer-Encoding (only chunked)"}
)

var crlf = []byte("\r\n")

// parseHTTPRequest parses the first request in buf. It returns the number of bytes the request
// occupies, or 0 and no error when buf holds only part of it. A chunked body is decoded into
// *chunkScratch. On an incomplete request whose headers are complete, req.expectContinue tells
// whether the client waits for "100 Continue".
func parseHTTPRequest(buf []byte, req *httpRequest, chunkScratch *[]byte) (int, error) {
	*req = httpRequest{}
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		if len(buf) > maxHeaderBytes {
			return 0, errHeaderTooLarge
		}
		return 0, nil
	}
	if end > maxHeaderBytes {
		return 0, errHeaderTooLarge
	}
	head := buf[:end]
	line, rest, _ := bytes.Cut(head, crlf)
	if err := req.parseRequestLine(line); err != nil {
		return 0, err
	}
	contentLength, chunked := -1, false
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, crlf)
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return 0, errBadHeader
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("content-length")):
			n, ok := parseDecimal(value)
			if !ok || (contentLength >= 0 && contentLength != n) {
				return 0, errBadLength
			}
			contentLength = n
		case bytes.EqualFold(name, []byte("transfer-encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return 0, errBadEncoding
			}
			chunked = true
		case bytes.EqualFold(name, []byte("connection")):
			if containsTokenFold(value, "close") {
				req.keepAlive = false
			} else if containsTokenFold(value, "keep-alive") {
				req.keepAlive = true
			}
		case bytes.EqualFold(name, []byte("expect")):
			req.expectContinue = bytes.EqualFold(value, []byte("100-continue"))
		case bytes.EqualFold(name, []byte(headerRequestID)):
			req.requestID = value
		case bytes.EqualFold(name, []byte(faultHeader)):
			req.fault = value
		}
	}
	bodyStart := end + 4
	if chunked {
		// RFC 9112 §6.3: Transfer-Encoding overrides Content-Length.
		n, body, err := decodeChunked(buf[bodyStart:], (*chunkScratch)[:0])
		*chunkScratch = body
		if err != nil || n == 0 {
			return 0, err
		}
		req.body = body
		return bodyStart + n, nil
	}
	if contentLength < 0 {
		contentLength = 0
	}
	if contentLength > maxBodyBytes {
		return 0, errBodyTooLarge
	}
	if len(buf)-bodyStart < contentLength {
		return 0, nil
	}
	req.body = buf[bodyStart : bodyStart+contentLength]
	return bodyStart + contentLength, nil
}

// parseRequestLine reads "METHOD target HTTP/1.x" and sets the keep-alive default.
func (req *httpRequest) parseRequestLine(line []byte) error {
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 {
		return errBadRequestLine
	}
	switch string(proto) {
	case "HTTP/1.1":
		req.keepAlive = true
	case "HTTP/1.0":
		req.keepAlive = false
	default:
		return errBadRequestLine
	}
	// Absolute form (RFC 9112 §3.2.2): keep only the path.
	if bytes.HasPrefix(target, []byte("http://")) || bytes.HasPrefix(target, []byte("https://")) {
		scheme := bytes.Index(target, []byte("//"))
		if slash := bytes.IndexByte(target[scheme+2:], '/'); slash >= 0 {
			target = target[scheme+2+slash:]
		} else {
			target = []byte("/")
		}
	}
	if q := bytes.IndexByte(target, '?'); q >= 0 {
		target = target[:q]
	}
	req.method, req.path = method, target
	return nil
}

// decodeChunked decodes a chunked body from buf into dst. It returns the bytes consumed
// (0 when buf holds only part of the body), the decoded body and any error. Trailers are
// skipped.
func decodeChunked(buf, dst []byte) (int, []byte, error) {
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
			// Trailer section: header lines up to an empty line.
			for {
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
		if len(dst)+size > maxBodyBytes {
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

// containsTokenFold reports whether the comma-separated list v holds token, ignoring case.
func containsTokenFold(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(item), []byte(token)) {
			return true
		}
	}
	return false
}
