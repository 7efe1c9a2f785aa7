package extract

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// appendDecoded appends the decoded value of a string's content, already validated by
// scanString, to dst. It follows encoding/json exactly: a valid surrogate pair of \u
// escapes becomes one rune, any other escaped surrogate becomes U+FFFD, and each byte of
// invalid UTF-8 becomes U+FFFD.
func appendDecoded(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		j := nextEscape(raw, i)
		dst = append(dst, raw[i:j]...)
		if j >= len(raw) {
			break
		}
		i = j
		if raw[i] != '\\' {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
			continue
		}
		switch c := raw[i+1]; c {
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2 = hex4(raw[i+2:])
				}
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, unescapeByte(c))
			i += 2
		}
	}
	return dst
}

// unescapeByte maps the character after a backslash (other than 'u') to its byte.
func unescapeByte(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // '"', '\\' and '/' stand for themselves
}

// hex4 reads four hex digits validated by scanString; it returns -1 if they are not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		v := unhex(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | rune(v)
	}
	return r
}

// nextEscape returns the index of the first '\\' or non-ASCII byte at or after i, or
// len(b): the bytes before it are copied as they are.
func nextEscape(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		e := x ^ (lsb * '\\')
		if m := ((e - lsb) &^ e & msb) | (x & msb); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if b[i] == '\\' || b[i] >= 0x80 {
			return i
		}
	}
	return i
}

// bytes returns the decoded value of r: a view into the body when nothing needs decoding
// (capacity clipped so that appending to it cannot overwrite the body), otherwise the
// value decoded into *buf.
func (s *scanner) bytes(r rawString, buf *[]byte) []byte {
	if !r.decode {
		return s.buf[r.start:r.end:r.end]
	}
	*buf = appendDecoded((*buf)[:0], s.buf[r.start:r.end])
	return *buf
}

// appendTo appends the decoded value of r to dst.
func (s *scanner) appendTo(dst []byte, r rawString) []byte {
	if !r.decode {
		return append(dst, s.buf[r.start:r.end]...)
	}
	return appendDecoded(dst, s.buf[r.start:r.end])
}

// name returns the decoded value of a member name or a short string compared against
// constants; escaped names decode into the scratch buffer.
func (s *scanner) name(r rawString) []byte {
	return s.bytes(r, &s.f.scratch)
}

// equals reports whether the decoded value of r is lit.
func (s *scanner) equals(r rawString, lit string) bool {
	if !r.decode && r.end-r.start != len(lit) {
		return false
	}
	return string(s.name(r)) == lit
}
