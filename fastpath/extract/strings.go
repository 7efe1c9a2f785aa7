package extract

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
)

// rawString is a scanned JSON string: buf[start:end] is its content between the quotes.
// Content without escapes is its own value and can be used in place.
type rawString struct {
	start, end int
	escaped    bool // has a backslash escape, so its value must be decoded
}

func (r rawString) empty() bool { return r.start == r.end }

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// specialMask has the high bit set in each byte of the 8-byte little-endian word x that
// ends the fast scan of a short string: '"', '\\' or a control character below 0x20. These
// are the has-zero-byte test of "Bit Twiddling Hacks" on x^'"' and x^'\\' and its
// has-less-than test for 0x20. Each is exact for its lowest hit (borrows make false
// positives only above a true hit), so the lowest set bit marks the first special byte.
func specialMask(x uint64) uint64 {
	q := x ^ lsb*'"'
	e := x ^ lsb*'\\'
	return ((q - lsb) &^ q) | ((e - lsb) &^ e) | ((x - lsb*0x20) &^ x)
}

// firstSpecial returns the index of the first byte specialMask flags in the 16 bytes at
// b[i:], or -1.
func firstSpecial(b []byte, i int) int {
	m0 := specialMask(binary.LittleEndian.Uint64(b[i:])) & msb
	m1 := specialMask(binary.LittleEndian.Uint64(b[i+8:])) & msb
	switch {
	case m0 != 0:
		return i + bits.TrailingZeros64(m0)>>3
	case m1 != 0:
		return i + 8 + bits.TrailingZeros64(m1)>>3
	}
	return -1
}

// scanString validates the string whose opening quote is at pos and moves pos past its
// closing quote. Escapes are validated here so that decoding cannot fail later.
func (s *scanner) scanString() (rawString, error) {
	b := s.buf
	r := rawString{start: s.pos + 1}
	if r.start+16 <= len(b) {
		// Member names and short values end within 16 bytes: one SWAR step.
		if k := firstSpecial(b, r.start); k >= 0 && b[k] == '"' {
			r.end = k
			s.pos = k + 1
			return r, nil
		}
	}
	_, r, err := s.walkString(nil, false)
	return r, err
}

// appendString is scanString for a string whose value is wanted in a buffer of ours, such
// as the chat text: it appends the decoded value to dst in the same pass.
func (s *scanner) appendString(dst []byte) ([]byte, rawString, error) {
	b := s.buf
	r := rawString{start: s.pos + 1}
	if r.start+16 <= len(b) {
		if k := firstSpecial(b, r.start); k >= 0 && b[k] == '"' {
			r.end = k
			s.pos = k + 1
			return append(dst, b[r.start:k]...), r, nil
		}
	}
	return s.walkString(dst, true)
}

// walkString validates the string whose opening quote is at pos, moves pos past it, and
// with keep set appends its decoded value to dst. It makes passes that are each cheaper
// than one byte-class loop: bytes.IndexByte (vectorised) finds the closing quote and,
// between there and the walk's position, the escapes; then nextControl looks for control
// characters. The quote's position is kept across escapes so that each byte is searched
// once; only an escaped quote `\"` moves the search on.
func (s *scanner) walkString(dst []byte, keep bool) ([]byte, rawString, error) {
	b := s.buf
	open := s.pos
	r := rawString{start: open + 1}
	q := -1 // the first '"' at or after i, once searched for
	for i := r.start; ; {
		if q < i {
			if q = bytes.IndexByte(b[i:], '"'); q < 0 {
				return dst, r, s.errMsg(len(b), "unterminated string starting at byte "+strconv.Itoa(open))
			}
			q += i
		}
		e := 0 // escapes often come in runs, like "\n\n": skip the search then
		if b[i] != '\\' {
			e = bytes.IndexByte(b[i:q], '\\')
		}
		if e < 0 {
			if keep {
				dst = append(dst, b[i:q]...)
			}
			r.end = q
			break
		}
		e += i
		r.escaped = true
		if keep {
			dst = append(dst, b[i:e]...)
		}
		if e+1 < len(b) && unescaped[b[e+1]] != 0 { // the one-character escapes
			if keep {
				dst = append(dst, unescaped[b[e+1]])
			}
			i = e + 2
			continue
		}
		n, err := s.escapeLen(e, open)
		if err != nil {
			return dst, r, err
		}
		if keep {
			dst, n = appendEscape(dst, b[e:])
		}
		i = e + n
	}
	s.pos = r.end + 1
	if k := nextControl(b, r.start, r.end); k < r.end {
		c := b[k]
		h := string([]byte{hexDigits[c>>4], hexDigits[c&15]})
		return dst, r, s.errMsg(k, "control character 0x"+h+" inside a string (escape it, for example as \\n or \\u00"+h+")")
	}
	return dst, r, nil
}

// escapeLen validates the escape sequence whose backslash is at e and returns its length.
func (s *scanner) escapeLen(e, open int) (int, error) {
	b := s.buf
	if e+1 >= len(b) {
		return 0, s.errMsg(len(b), "unterminated string starting at byte "+strconv.Itoa(open))
	}
	switch b[e+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		for k := e + 2; k < e+6; k++ {
			if k >= len(b) || unhex(b[k]) < 0 {
				return 0, s.errExpected(k, expHex)
			}
		}
		return 6, nil
	}
	return 0, s.errExpected(e+1, expEscape)
}

// nextControl returns the index of the first byte in b[i:end] below 0x20, or end, with
// the has-less-than test of specialMask, 64 bytes per step.
func nextControl(b []byte, i, end int) int {
	// Reslicing lets the compiler prove every load in bounds: no checks in the loops.
	w := b[i:end]
	for len(w) >= 64 {
		w0 := binary.LittleEndian.Uint64(w)
		w1 := binary.LittleEndian.Uint64(w[8:])
		w2 := binary.LittleEndian.Uint64(w[16:])
		w3 := binary.LittleEndian.Uint64(w[24:])
		w4 := binary.LittleEndian.Uint64(w[32:])
		w5 := binary.LittleEndian.Uint64(w[40:])
		w6 := binary.LittleEndian.Uint64(w[48:])
		w7 := binary.LittleEndian.Uint64(w[56:])
		lo := (w0-lsb*0x20)&^w0 | (w1-lsb*0x20)&^w1 | (w2-lsb*0x20)&^w2 | (w3-lsb*0x20)&^w3
		hi := (w4-lsb*0x20)&^w4 | (w5-lsb*0x20)&^w5 | (w6-lsb*0x20)&^w6 | (w7-lsb*0x20)&^w7
		if (lo|hi)&msb != 0 {
			break
		}
		w = w[64:]
	}
	for len(w) >= 8 {
		x := binary.LittleEndian.Uint64(w)
		if m := (x - lsb*0x20) &^ x & msb; m != 0 {
			return end - len(w) + bits.TrailingZeros64(m)>>3
		}
		w = w[8:]
	}
	for k, c := range w {
		if c < 0x20 {
			return end - len(w) + k
		}
	}
	return end
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
