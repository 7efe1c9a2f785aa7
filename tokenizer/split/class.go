package split

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes, as bits of one byte per rune. They come from Go's unicode
// package (general categories and the White_Space property, the definitions the
// Rust regex engines use) corrected by overrides: the code points whose classes
// Hugging Face tokenizers' engine sees differently because Go's tables are of an
// older Unicode version (testdata/hf_classes.json records HF's view of every
// code point; TestHFClasses checks all of them).
const (
	cL  uint8 = 1 << iota // \p{L}
	cN                    // \p{N}
	cM                    // \p{M}
	cP                    // \p{P}
	cS                    // \p{S}
	cWS                   // \s: Unicode White_Space
)

var (
	bmpOnce sync.Once
	// bmp holds the class bits of every code point below U+10000; it is filled
	// once, by the first Compile, and only read afterwards.
	bmp [0x10000]uint8
)

func initTables() {
	bmpOnce.Do(func() {
		for r := rune(0); r < 0x10000; r++ {
			bmp[r] = slowClass(r)
		}
	})
}

// classSpan gives the class bits c of the code points lo..hi.
type classSpan struct {
	lo, hi rune
	c      uint8
}

// slowClass computes the class bits of r from the tables.
func slowClass(r rune) uint8 {
	lo, hi := 0, len(overrides)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch o := &overrides[m]; {
		case r < o.lo:
			hi = m
		case r > o.hi:
			lo = m + 1
		default:
			return o.c
		}
	}
	var c uint8
	if unicode.IsLetter(r) {
		c |= cL
	}
	if unicode.IsNumber(r) {
		c |= cN
	}
	if unicode.IsMark(r) {
		c |= cM
	}
	if unicode.IsPunct(r) {
		c |= cP
	}
	if unicode.IsSymbol(r) {
		c |= cS
	}
	if unicode.IsSpace(r) { // Go's IsSpace is exactly the White_Space property
		c |= cWS
	}
	return c
}

// classAt decodes the rune at s[i] (i < len(s)) and returns it, its class bits
// and its width in bytes. An invalid byte is a width-1 rune with no class bits
// (an "other" character), so scanners never stall or panic on invalid UTF-8.
func classAt(s string, i int) (rune, uint8, int) {
	b := s[i]
	if b < utf8.RuneSelf {
		return rune(b), bmp[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return r, 0, 1
	}
	if r < 0x10000 {
		return r, bmp[r], w
	}
	return r, slowClass(r), w
}

// runOf returns the end of the longest run starting at i of runes whose class
// intersects mask.
func runOf(s string, i int, mask uint8) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if bmp[b]&mask == 0 {
				return i
			}
			i++
			continue
		}
		_, c, w := classAt(s, i)
		if c&mask == 0 {
			return i
		}
		i += w
	}
	return i
}

// crlfRun returns the end of the run of '\r' and '\n' bytes starting at i.
func crlfRun(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// whitespaceTail implements the three whitespace alternatives shared by every
// pattern here, tried in this order at i, where s[i] starts a White_Space rune:
//
//	\s*[\r\n]+   (only if withCRLF)
//	\s+(?!\S)
//	\s+
//
// With backtracking, \s*[\r\n]+ ends just after the last '\r' or '\n' of the
// whitespace run (it fails if the run has none); \s+(?!\S) takes the whole run at
// the end of the text and otherwise the run minus its last rune (failing if that
// leaves nothing); \s+ takes the whole run.
func whitespaceTail(s string, i int, withCRLF bool) int {
	w := runOf(s, i, cWS)
	if withCRLF {
		for j := w - 1; j >= i; j-- {
			if s[j] == '\r' || s[j] == '\n' {
				return j + 1
			}
		}
	}
	if w == len(s) {
		return w
	}
	// Back off one rune; \s+(?!\S) then holds because that rune is whitespace.
	_, lw := utf8.DecodeLastRuneInString(s[i:w])
	if w-lw > i {
		return w - lw
	}
	return w
}
