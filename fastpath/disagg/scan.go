package disagg

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// MaxDepth is the deepest nesting of objects and arrays accepted, counting the body itself
// as level 1. It equals encoding/json's limit (and fastpath/extract's), so a body the
// extractor accepted is never rejected here for its depth.
const MaxDepth = 10000

// scanner walks one JSON object once, validating it as strictly as encoding/json (except
// for UTF-8, passed through as sent, as fastpath/extract does). pos is the next unread byte.
// The string scanning is a trimmed copy of fastpath/extract's, which this package may not
// import (fastpath imports this package).
type scanner struct {
	buf []byte
	pos int
	// kinds has one bit per nesting level, set for an object, so that skipping a value of
	// hostile depth costs neither recursion nor allocation. 1.25 KiB, on the caller's stack.
	kinds [MaxDepth/64 + 1]uint64
}

// member is one top-level member: the name's content between its quotes, and the value.
type member struct {
	nameStart, nameEnd int
	escaped            bool // the name has a backslash escape
	valStart, valEnd   int
}

func (s *scanner) skipWS() {
	b := s.buf
	i := s.pos
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	s.pos = i
}

// peek returns the byte at pos after whitespace, or 0 at the end (0 starts no token).
func (s *scanner) peek() byte {
	s.skipWS()
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// begin checks the object's opening brace and reports whether a member follows.
func (s *scanner) begin() (more bool, err error) {
	if s.peek() != '{' {
		return false, ErrInvalidBody
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return false, nil
	}
	return true, nil
}

// member scans one top-level member and the ',' or '}' after it; more reports a ','.
func (s *scanner) member() (m member, more bool, err error) {
	// begin and the ',' case of next leave pos at a non-space byte or the end.
	if s.pos >= len(s.buf) || s.buf[s.pos] != '"' {
		return m, false, ErrInvalidBody
	}
	m.nameStart = s.pos + 1
	if m.escaped, err = s.scanString(); err != nil {
		return m, false, err
	}
	m.nameEnd = s.pos - 1
	if s.peek() != ':' {
		return m, false, ErrInvalidBody
	}
	s.pos++
	s.skipWS()
	m.valStart = s.pos
	if err = s.skipValue(1); err != nil {
		return m, false, err
	}
	m.valEnd = s.pos
	more, err = s.next('}')
	return m, more, err
}

// end checks that nothing but whitespace follows the object.
func (s *scanner) end() error {
	if s.skipWS(); s.pos != len(s.buf) {
		return ErrInvalidBody
	}
	return nil
}

// next consumes the ',' or the closer after a value; more reports a ','.
func (s *scanner) next(closer byte) (more bool, err error) {
	switch s.peek() {
	case ',':
		s.pos++
		s.skipWS()
		return true, nil
	case closer:
		s.pos++
		return false, nil
	}
	return false, ErrInvalidBody
}

// name scans `"name" :` in a nested object, leaving pos at the value.
func (s *scanner) name() error {
	if s.pos >= len(s.buf) || s.buf[s.pos] != '"' {
		return ErrInvalidBody
	}
	if _, err := s.scanString(); err != nil {
		return err
	}
	if s.peek() != ':' {
		return ErrInvalidBody
	}
	s.pos++
	s.skipWS()
	return nil
}

// skipValue validates the value at pos (whitespace skipped) and moves pos past it. depth is
// the nesting level of the container holding it. Containers are walked iteratively.
func (s *scanner) skipValue(depth int) error {
	b := s.buf
	base := depth
	for {
		if s.pos < len(b) && (b[s.pos] == '{' || b[s.pos] == '[') {
			obj := b[s.pos] == '{'
			depth++
			if depth > MaxDepth {
				return ErrInvalidBody
			}
			w, bit := depth>>6, uint64(1)<<(depth&63)
			if obj {
				s.kinds[w] |= bit
			} else {
				s.kinds[w] &^= bit
			}
			s.pos++
			c := s.peek()
			switch {
			case obj && c == '}', !obj && c == ']':
				s.pos++
				depth--
			case obj:
				if err := s.name(); err != nil {
					return err
				}
				continue
			default:
				continue
			}
		} else if err := s.scanScalar(); err != nil {
			return err
		}
		// A value has ended: close containers until one continues with ','.
		for {
			if depth == base {
				return nil
			}
			obj := s.kinds[depth>>6]&(uint64(1)<<(depth&63)) != 0
			closer := byte(']')
			if obj {
				closer = '}'
			}
			more, err := s.next(closer)
			if err != nil {
				return err
			}
			if more {
				if obj {
					if err := s.name(); err != nil {
						return err
					}
				}
				break
			}
			depth--
		}
	}
}

// scanScalar validates the string, number or literal at pos.
func (s *scanner) scanScalar() error {
	if s.pos >= len(s.buf) {
		return ErrInvalidBody
	}
	switch c := s.buf[s.pos]; c {
	case '"':
		_, err := s.scanString()
		return err
	case 't':
		return s.scanLiteral("true")
	case 'f':
		return s.scanLiteral("false")
	case 'n':
		return s.scanLiteral("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.scanNumber()
		}
		return ErrInvalidBody
	}
}

func (s *scanner) scanLiteral(lit string) error {
	if len(s.buf)-s.pos < len(lit) || string(s.buf[s.pos:s.pos+len(lit)]) != lit {
		return ErrInvalidBody
	}
	s.pos += len(lit)
	return nil
}

// scanNumber validates the number at pos (RFC 8259 §6) and moves pos past it.
func (s *scanner) scanNumber() error {
	b := s.buf
	i := s.pos
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return ErrInvalidBody
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return ErrInvalidBody
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return ErrInvalidBody
		}
		i = digits(b, i+1)
	}
	s.pos = i
	return nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// specialMask flags, with the high bit of each byte of the little-endian word x, the bytes
// that end the fast scan of a short string: '"', '\\' and control characters. These are the
// has-zero-byte and has-less-than tests of "Bit Twiddling Hacks"; each is exact for its
// lowest hit, so the lowest set bit marks the first special byte.
func specialMask(x uint64) uint64 {
	q := x ^ lsb*'"'
	e := x ^ lsb*'\\'
	return ((q - lsb) &^ q) | ((e - lsb) &^ e) | ((x - lsb*0x20) &^ x)
}

// scanString validates the string whose opening quote is at pos and moves pos past its
// closing quote; escaped reports a backslash escape in it. Member names and short values
// end within 16 bytes and take one SWAR step; longer strings are searched with
// bytes.IndexByte (vectorised) for the quote and the escapes, then checked for control
// characters eight bytes at a time.
func (s *scanner) scanString() (escaped bool, err error) {
	b := s.buf
	start := s.pos + 1
	if start+16 <= len(b) {
		m0 := specialMask(binary.LittleEndian.Uint64(b[start:])) & msb
		m1 := specialMask(binary.LittleEndian.Uint64(b[start+8:])) & msb
		k := -1
		switch {
		case m0 != 0:
			k = start + bits.TrailingZeros64(m0)>>3
		case m1 != 0:
			k = start + 8 + bits.TrailingZeros64(m1)>>3
		}
		if k >= 0 && b[k] == '"' {
			s.pos = k + 1
			return false, nil
		}
	}
	q := -1 // the first '"' at or after i, once searched for
	i := start
	for {
		if q < i {
			if q = bytes.IndexByte(b[i:], '"'); q < 0 {
				return escaped, ErrInvalidBody
			}
			q += i
		}
		e := 0
		if b[i] != '\\' {
			e = bytes.IndexByte(b[i:q], '\\')
		}
		if e < 0 {
			break
		}
		e += i
		escaped = true
		if e+1 >= len(b) {
			return escaped, ErrInvalidBody
		}
		switch b[e+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = e + 2
		case 'u':
			if e+6 > len(b) || hex4(b[e+2:e+6]) < 0 {
				return escaped, ErrInvalidBody
			}
			i = e + 6
		default:
			return escaped, ErrInvalidBody
		}
	}
	if hasControl(b[start:q]) {
		return escaped, ErrInvalidBody
	}
	s.pos = q + 1
	return escaped, nil
}

// hasControl reports a byte below 0x20 in w, eight bytes per step.
func hasControl(w []byte) bool {
	for len(w) >= 8 {
		x := binary.LittleEndian.Uint64(w)
		if (x-lsb*0x20)&^x&msb != 0 {
			return true
		}
		w = w[8:]
	}
	for _, c := range w {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// hex4 reads four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(v)
	}
	return r
}
