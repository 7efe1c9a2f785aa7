package extract

import "github.com/smg-go/smg/internal/jsonscan"

// appendTo appends the decoded value of r to dst.
func (s *scanner) appendTo(dst []byte, r rawString) []byte {
	if r.escaped {
		return jsonscan.AppendUnescaped(dst, s.buf[r.start:r.end])
	}
	return append(dst, s.buf[r.start:r.end]...)
}

// bytes returns the decoded value of r: a view into the body when nothing needs decoding
// (capacity clipped so that appending to it cannot overwrite the body), otherwise the
// value decoded into *buf.
func (s *scanner) bytes(r rawString, buf *[]byte) []byte {
	if !r.escaped {
		return s.buf[r.start:r.end:r.end]
	}
	*buf = s.appendTo((*buf)[:0], r)
	return *buf
}

// name returns the decoded value of a member name or a short string compared against
// constants; escaped names decode into the scratch buffer.
func (s *scanner) name(r rawString) []byte {
	return s.bytes(r, &s.f.scratch)
}

// equals reports whether the decoded value of r is lit.
func (s *scanner) equals(r rawString, lit string) bool {
	if !r.escaped && r.end-r.start != len(lit) {
		return false
	}
	return string(s.name(r)) == lit
}
