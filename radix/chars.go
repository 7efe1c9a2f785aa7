package radix

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// The core stores every key as bytes. A text tree counts characters the way Go's
// utf8 decoding does: a valid UTF-8 sequence is one character, and each byte that is
// not part of one counts as one character on its own. A token tree stores each uint32
// token as 4 native-endian bytes and counts tokens. The functions here are the only
// places the two kinds differ.

// isCont reports whether b is a UTF-8 continuation byte (10xxxxxx). Every other
// byte starts a character, because a decoder only ever consumes continuation bytes
// after a lead byte: that is what lets a boundary be found without decoding from the
// start of the text.
func isCont(b byte) bool { return b&0xC0 == 0x80 }

// invalidKey is the first-unit key of a character that is a lone invalid byte; valid
// runes are at most 0x10FFFF, so the two never collide.
const invalidKey = 0x8000_0000

// firstKey identifies the first character (or token) of b, which is not empty.
func firstKey(b []byte, tokens bool) uint32 {
	if tokens {
		return binary.NativeEndian.Uint32(b)
	}
	if c := b[0]; c < utf8.RuneSelf {
		return uint32(c)
	}
	r, w := utf8.DecodeRune(b)
	if r == utf8.RuneError && w == 1 {
		return invalidKey | uint32(b[0])
	}
	return uint32(r)
}

// countUnits counts the characters (or tokens) of b, which starts at a character
// boundary and ends at one.
func countUnits(b []byte, tokens bool) int {
	if tokens {
		return len(b) / 4
	}
	return countChars(b)
}

// countChars equals utf8.RuneCount but takes ASCII 32 or eight bytes at a time: in
// a word with a non-ASCII byte it adds the ASCII bytes before that byte at once and
// decodes only the character there.
func countChars(b []byte) int {
	n := 0
	for len(b) >= 8 {
		// Runs of ASCII, 32 bytes at a time.
		for len(b) >= 32 {
			w := binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[8:]) |
				binary.LittleEndian.Uint64(b[16:]) | binary.LittleEndian.Uint64(b[24:])
			if w&0x8080808080808080 != 0 {
				break
			}
			n += 32
			b = b[32:]
		}
		if len(b) < 8 {
			break
		}
		hi := binary.LittleEndian.Uint64(b) & 0x8080808080808080
		if hi == 0 {
			n += 8
			b = b[8:]
			continue
		}
		k := bits.TrailingZeros64(hi) / 8
		_, w := utf8.DecodeRune(b[k:])
		n += k + 1
		b = b[k+w:]
	}
	return n + utf8.RuneCount(b)
}

// commonBytes returns the length of the longest common prefix of a and b. It lets
// bytes.Equal (vector instructions) skip equal blocks and looks for the first
// difference only inside the block that differs.
func commonBytes(a, b []byte) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	const block = 256
	i := 0
	for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
		i += block
	}
	for i+8 <= n {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonUnits returns the byte length of the longest common prefix of a and b made
// of whole characters (or tokens) of both. a and b start at a character boundary.
func commonUnits(a, b []byte, tokens bool) int {
	p := commonBytes(a, b)
	if tokens {
		return p &^ 3
	}
	return charBoundary(a, b, p)
}

// charBoundary backs p, the byte length of the common prefix of a and b, up to the
// longest prefix that both split into the same characters.
//
// p is safe when the byte at p of each text is absent or starts a character: no
// character of either text can then reach past p, and characters before p see equal
// bytes. It is also safe after an ASCII byte, which ends every character it is in.
// Otherwise re-decode both texts from the last byte before p that starts a
// character (at most three back in valid UTF-8) and keep the characters both decode
// alike.
func charBoundary(a, b []byte, p int) int {
	if p == 0 || a[p-1] < utf8.RuneSelf {
		return p
	}
	if (p == len(a) || !isCont(a[p])) && (p == len(b) || !isCont(b[p])) {
		return p
	}
	s := p - 1
	for s > 0 && isCont(a[s]) {
		s--
	}
	for s < p {
		_, wa := utf8.DecodeRune(a[s:])
		_, wb := utf8.DecodeRune(b[s:])
		if wa != wb || s+wa > p {
			break
		}
		s += wa
	}
	return s
}

// cutUnits returns the largest n <= limit such that b[:n] ends at a character (or
// token) boundary; limit < len(b). It looks for a byte that starts a character at
// limit or among the three bytes before it (or the start of b); if all four are
// continuation bytes, the byte at limit cannot belong to a character that starts
// before it (a character is at most four bytes), so limit is a boundary.
func cutUnits(b []byte, limit int, tokens bool) int {
	if tokens {
		return limit &^ 3
	}
	for j := limit; j > limit-4; j-- {
		if j == 0 || !isCont(b[j]) {
			return j
		}
	}
	return limit
}
