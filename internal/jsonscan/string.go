package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

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

// String validates the string whose opening quote is at i (the caller has checked it) and
// returns the position after its closing quote; its content is b[i+1:pos-1]. escaped
// reports a backslash escape in it, so that its value must be decoded (AppendUnescaped,
// EqualUnescaped); without one the content is its own value. Escapes are validated here,
// so decoding cannot fail later.
func String(b []byte, i int) (pos int, escaped bool, k Kind) {
	if i+17 <= len(b) {
		// Member names and short values end within 16 bytes: one SWAR step.
		if q := firstSpecial(b, i+1); q >= 0 && b[q] == '"' {
			return q + 1, false, OK
		}
	}
	_, pos, escaped, k = walk(nil, b, i, false)
	return pos, escaped, k
}

// AppendString is String for a string whose value is wanted in a buffer, such as the chat
// text: it also appends the decoded value to dst, in the same pass. On failure dst may
// hold part of the value.
func AppendString(dst, b []byte, i int) ([]byte, int, bool, Kind) {
	if i+17 <= len(b) {
		if q := firstSpecial(b, i+1); q >= 0 && b[q] == '"' {
			return append(dst, b[i+1:q]...), q + 1, false, OK
		}
	}
	return walk(dst, b, i, true)
}

// walk validates the string whose opening quote is at open and, with keep set, appends its
// decoded value to dst. It makes passes that are each cheaper than one byte-class loop:
// bytes.IndexByte (vectorised) finds the closing quote and, between there and the walk's
// position, the escapes; then nextControl looks for control characters. The quote's
// position is kept across escapes so that each byte is searched once; only an escaped
// quote `\"` moves the search on. Escapes are checked before control characters, so a
// string with both reports the escape.
func walk(dst, b []byte, open int, keep bool) (_ []byte, pos int, escaped bool, k Kind) {
	start := open + 1
	q := -1 // the first '"' at or after i, once searched for
	i := start
	for {
		if q < i {
			if q = bytes.IndexByte(b[i:], '"'); q < 0 {
				return dst, open, escaped, Unterminated
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
			break
		}
		e += i
		escaped = true
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
		n, at, k := escapeLen(b, e, open)
		if k != OK {
			return dst, at, escaped, k
		}
		if keep {
			dst, n = appendEscape(dst, b[e:])
		}
		i = e + n
	}
	if c := nextControl(b, start, q); c < q {
		return dst, c, escaped, ControlChar
	}
	return dst, q + 1, escaped, OK
}

// escapeLen validates the escape sequence whose backslash is at e, in the string opened
// at open, and returns its length, or the failure.
func escapeLen(b []byte, e, open int) (n, at int, k Kind) {
	if e+1 >= len(b) {
		return 0, open, Unterminated
	}
	switch b[e+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, 0, OK
	case 'u':
		for i := e + 2; i < e+6; i++ {
			if i >= len(b) || unhex(b[i]) < 0 {
				return 0, i, ExpectedHex
			}
		}
		return 6, 0, OK
	}
	return 0, e + 1, ExpectedEscape
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
