package extract

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// appendUnescaped appends the decoded value of string content with escapes, validated
// by scanString: bytes.IndexByte finds the escapes, and the runs between them are copied.
func appendUnescaped(dst, raw []byte) []byte {
	for {
		e := bytes.IndexByte(raw, '\\')
		if e < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:e]...)
		var n int
		dst, n = appendEscape(dst, raw[e:])
		raw = raw[e+n:]
	}
}

// appendEscape decodes the escape sequence at the start of raw, validated by scanString,
// and returns how many bytes it took. Like encoding/json, a \u escape of a high surrogate
// followed by one of a low surrogate is one rune; any other escaped surrogate is U+FFFD,
// and what follows it is decoded on its own.
func appendEscape(dst, raw []byte) ([]byte, int) {
	if c := raw[1]; c != 'u' {
		return append(dst, unescaped[c]), 2
	}
	r, n := hex4(raw[2:]), 6
	if utf16.IsSurrogate(r) {
		r2 := rune(-1)
		if len(raw) >= 12 && raw[6] == '\\' && raw[7] == 'u' {
			r2 = hex4(raw[8:])
		}
		if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
			r, n = pair, 12
		} else {
			r = utf8.RuneError
		}
	}
	return utf8.AppendRune(dst, r), n
}

// unescaped maps the character after a backslash to the byte it stands for; zero marks
// 'u' and the characters that are no escape at all.
var unescaped = [256]byte{
	'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

// hex4 reads four hex digits, or returns -1 if b does not start with them.
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

// appendTo appends the decoded value of r to dst.
func (s *scanner) appendTo(dst []byte, r rawString) []byte {
	if r.escaped {
		return appendUnescaped(dst, s.buf[r.start:r.end])
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
