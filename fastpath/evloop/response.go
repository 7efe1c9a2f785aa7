package evloop

import (
	"bytes"
	"errors"

	"github.com/smg-go/smg/internal/http1"
)

// respHead is a worker's parsed response head: offsets into the upstream read buffer.
type respHead struct {
	status        int
	reason        http1.Span // the status line after "HTTP/1.x "
	headers       [http1.MaxHeaders]http1.Field
	nhdr          int
	contentLength int  // -1: none
	chunked       bool // Transfer-Encoding: chunked
	close         bool // the worker closes the connection after this answer
}

var (
	errBadResponse      = errors.New("malformed response from the worker")
	errResponseTooLarge = errors.New("response head from the worker exceeds 64 KiB")
)

const maxResponseHead = 64 << 10

// finalHead parses into h the worker's final response head at the start of u.in, interim
// 1xx answers skipped, for the owner whose onUpstreamData runs: head is that head's bytes and
// rest what follows it in u.in. head is nil while the head has not arrived whole (the interim
// answers already parsed are dropped from u.in), and when it is malformed: the owner's attempt
// has then failed.
func (u *upstreamConn) finalHead(h *respHead) (head, rest []byte) {
	data := u.in
	n, err := parseResponseHead(data, h)
	for err == nil && n > 0 && h.status < 200 { // 1xx: interim, skip it
		data = data[n:]
		n, err = parseResponseHead(data, h)
	}
	switch {
	case err != nil:
		u.owner.upstreamFailed(&UpstreamError{Err: err})
		return nil, nil
	case n == 0:
		if len(data) < len(u.in) {
			u.in = u.in[:copy(u.in, data)]
		}
		return nil, nil
	}
	return data[:n], data[n:]
}

// bodyDecoded settles u.in after the owner whose onUpstreamData runs decoded used of its n
// bytes: they are consumed, a decoding error fails the owner's attempt, and bytes after a
// complete answer mark u as not reusable. It reports whether the answer is complete.
func (u *upstreamConn) bodyDecoded(used, n int, done bool, err error) bool {
	u.in = u.in[:0]
	if err != nil {
		u.owner.upstreamFailed(&UpstreamError{Err: err})
		return false
	}
	if done {
		u.leftover = used < n
	}
	return done
}

// parseResponseHead parses the response head at the start of buf. It returns the bytes the
// head occupies, or 0 and no error while buf holds only part of it.
func parseResponseHead(buf []byte, h *respHead) (int, error) {
	// Not *h = respHead{...}: that clears MaxHeaders fields on every partial read; nhdr bounds
	// what is read of the index.
	h.status, h.reason, h.nhdr, h.contentLength, h.chunked, h.close = 0, http1.Span{}, 0, -1, false, false
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		if len(buf) > maxResponseHead {
			return 0, errResponseTooLarge
		}
		return 0, nil
	}
	if end > maxResponseHead {
		return 0, errResponseTooLarge
	}
	line := bytes.IndexByte(buf[:end+2], '\n') - 1
	if line < 12 || buf[line] != '\r' {
		return 0, errBadResponse
	}
	switch string(buf[:9]) {
	case "HTTP/1.1 ":
	case "HTTP/1.0 ":
		h.close = true
	default:
		return 0, errBadResponse
	}
	status, ok := http1.ParseDecimal(buf[9:12])
	if !ok || status < 100 || status > 999 || (line > 12 && buf[12] != ' ') {
		return 0, errBadResponse
	}
	h.status, h.reason = status, http1.Span{Start: 9, End: uint32(line)}
	if err := http1.ParseHeaders(buf, line+2, end, &h.headers, &h.nhdr); err != nil {
		return 0, errBadResponse
	}
	for i := range h.nhdr {
		name, value := h.headers[i].Name.Of(buf), h.headers[i].Value.Of(buf)
		switch len(name) {
		case 10:
			if http1.EqualFold(name, "connection") {
				if http1.ContainsTokenFold(value, "close") {
					h.close = true
				} else if http1.ContainsTokenFold(value, "keep-alive") {
					h.close = false
				}
			}
		case 14:
			if http1.EqualFold(name, "content-length") {
				n, ok := http1.ParseDecimal(value)
				if !ok || (h.contentLength >= 0 && h.contentLength != n) {
					return 0, errBadResponse
				}
				h.contentLength = n
			}
		case 17:
			if http1.EqualFold(name, "transfer-encoding") {
				if !http1.EqualFold(value, "chunked") {
					return 0, errBadResponse
				}
				h.chunked = true
			}
		}
	}
	return end + 4, nil
}

// hopByHop reports whether a worker's response header is the connection's own (RFC 9110
// §7.6.1), so that it is not relayed.
func hopByHop(name []byte) bool {
	switch len(name) {
	case 7:
		if http1.EqualFold(name, "trailer") || http1.EqualFold(name, "upgrade") {
			return true
		}
	case 10:
		if http1.EqualFold(name, "connection") || http1.EqualFold(name, "keep-alive") {
			return true
		}
	case 14:
		if http1.EqualFold(name, "content-length") {
			return true
		}
	case 16:
		if http1.EqualFold(name, "proxy-connection") {
			return true
		}
	case 17:
		if http1.EqualFold(name, "transfer-encoding") {
			return true
		}
	}
	return false
}

// Body framings of a worker's answer.
const (
	bodyNone    = iota // no body (1xx, 204, 304)
	bodyLength         // Content-Length
	bodyChunked        // Transfer-Encoding: chunked
	bodyClose          // until the worker closes the connection
)

// Chunked decoder states.
const (
	csSize = iota
	csExt
	csSizeLF
	csData
	csDataCR
	csDataLF
	csTrailer
	csTrailerLF
)

// bodyDecoder finds the end of a worker's answer body and hands out its payload, whatever
// its framing, without buffering: it is fed each read as it comes.
type bodyDecoder struct {
	mode      uint8
	state     uint8
	digits    uint8
	remaining int // bodyLength: bytes left; bodyChunked: bytes left of the current chunk
	size      int
	lineLen   int // bytes of the current trailer line
}

func (d *bodyDecoder) init(h *respHead) {
	*d = bodyDecoder{}
	switch {
	case h.status < 200 || h.status == 204 || h.status == 304:
		d.mode = bodyNone
	case h.chunked:
		d.mode = bodyChunked
	case h.contentLength >= 0:
		d.mode, d.remaining = bodyLength, h.contentLength
	default:
		d.mode = bodyClose
	}
}

// done reports whether the body is complete without reading further.
func (d *bodyDecoder) done() bool {
	return d.mode == bodyNone || (d.mode == bodyLength && d.remaining == 0)
}

// decode consumes p and appends the body's payload to dst. It returns dst, the bytes of p
// consumed (fewer than len(p) only when the body ended) and whether the body is complete.
func (d *bodyDecoder) decode(p, dst []byte) ([]byte, int, bool, error) {
	switch d.mode {
	case bodyNone:
		return dst, 0, true, nil
	case bodyLength:
		n := min(d.remaining, len(p))
		d.remaining -= n
		return append(dst, p[:n]...), n, d.remaining == 0, nil
	case bodyClose:
		return append(dst, p...), len(p), false, nil
	}
	return d.chunked(p, dst)
}

// chunked is decode for a chunked body: a state machine over the chunk sizes (extensions
// skipped), the data, its CRLFs and the trailer, fed byte by byte across reads.
func (d *bodyDecoder) chunked(p, dst []byte) ([]byte, int, bool, error) {
	i := 0
	for i < len(p) {
		c := p[i]
		switch d.state {
		case csSize:
			switch {
			case c == '\r':
				if d.digits == 0 {
					return dst, i, false, errBadResponse
				}
				d.state = csSizeLF
			case c == ';' || c == ' ' || c == '\t':
				if d.digits == 0 {
					return dst, i, false, errBadResponse
				}
				d.state = csExt
			default:
				v, ok := hexValue(c)
				if !ok || d.digits == 15 {
					return dst, i, false, errBadResponse
				}
				d.size, d.digits = d.size<<4|v, d.digits+1
			}
		case csExt:
			if c == '\r' {
				d.state = csSizeLF
			}
		case csSizeLF:
			if c != '\n' {
				return dst, i, false, errBadResponse
			}
			if d.size == 0 {
				d.state, d.lineLen = csTrailer, 0
			} else {
				d.state, d.remaining = csData, d.size
			}
		case csData:
			n := min(d.remaining, len(p)-i)
			dst = append(dst, p[i:i+n]...)
			d.remaining -= n
			i += n
			if d.remaining == 0 {
				d.state = csDataCR
			}
			continue
		case csDataCR:
			if c != '\r' {
				return dst, i, false, errBadResponse
			}
			d.state = csDataLF
		case csDataLF:
			if c != '\n' {
				return dst, i, false, errBadResponse
			}
			d.state, d.size, d.digits = csSize, 0, 0
		case csTrailer:
			if c == '\r' {
				d.state = csTrailerLF
			} else if d.lineLen++; d.lineLen > maxResponseHead {
				return dst, i, false, errBadResponse
			}
		case csTrailerLF:
			if c != '\n' {
				return dst, i, false, errBadResponse
			}
			if d.lineLen == 0 {
				return dst, i + 1, true, nil
			}
			d.state, d.lineLen = csTrailer, 0
		}
		i++
	}
	return dst, i, false, nil
}

func hexValue(c byte) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// chunkWidth is the width of the size field reserved in front of a relayed chunk, so that
// the payload of one read is framed in place: 6 hex digits hold 16 MiB, far above a read.
const chunkWidth = 6

// beginChunk reserves a chunk's size field at the end of dst; endChunk fills it in, or takes
// the reservation back when the chunk turned out empty (a zero-size chunk would end the body).
func beginChunk(dst []byte) ([]byte, int) {
	return append(dst, "000000\r\n"...), len(dst)
}

func endChunk(dst []byte, mark int) []byte {
	size := len(dst) - mark - chunkWidth - 2
	if size == 0 {
		return dst[:mark]
	}
	for j := chunkWidth - 1; j >= 0; j-- {
		dst[mark+j] = "0123456789abcdef"[size&0xf]
		size >>= 4
	}
	return append(dst, crlf...)
}
