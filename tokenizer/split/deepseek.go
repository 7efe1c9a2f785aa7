package split

import "unicode/utf8"

// digits implements PatternDeepSeekDigits, \p{N}{1,3}: the leftmost number
// rune and up to two more that follow it.
type digits struct{}

func (digits) Next(s string, start int) (int, int, bool) {
	for i := start; i < len(s); {
		_, c, w := classAt(s, i)
		if c&cN == 0 {
			i += w
			continue
		}
		e := i + w
		for k := 1; k < 3 && e < len(s); k++ {
			_, c2, w2 := classAt(s, e)
			if c2&cN == 0 {
				break
			}
			e += w2
		}
		return i, e, true
	}
	return 0, 0, false
}

// cjk implements PatternDeepSeekCJK, [\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+.
type cjk struct{}

func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x3040 && r <= 0x30FF)
}

func (cjk) Next(s string, start int) (int, int, bool) {
	for i := start; i < len(s); {
		b := s[i]
		if b < 0xE3 || b > 0xE9 { // every rune in the class encodes as E3..E9 xx xx
			if b < utf8.RuneSelf {
				i++
			} else {
				i += nextRune(s, i)
			}
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if !isCJK(r) {
			i += w
			continue
		}
		e := i + w
		for e < len(s) {
			r2, w2 := utf8.DecodeRuneInString(s[e:])
			if !isCJK(r2) {
				break
			}
			e += w2
		}
		return i, e, true
	}
	return 0, 0, false
}

// deepseek implements PatternDeepSeekWords:
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//	 ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// The first class is exactly ASCII punctuation. Unlike the others, this pattern
// can fail at a position (a number or a control or format character not
// followed by a letter or mark), so it leaves gaps.
type deepseek struct{}

func (deepseek) Next(s string, start int) (int, int, bool) {
	for i := start; i < len(s); i += nextRune(s, i) {
		if e := deepseekMatchAt(s, i); e >= 0 {
			return i, e, true
		}
	}
	return 0, 0, false
}

func isASCIIPunct(b byte) bool {
	return (b >= '!' && b <= '/') || (b >= ':' && b <= '@') || (b >= '[' && b <= '`') || (b >= '{' && b <= '~')
}

func isASCIIAlpha(b byte) bool {
	return (b|0x20) >= 'a' && (b|0x20) <= 'z'
}

func deepseekMatchAt(s string, i int) int {
	r, c, w := classAt(s, i)
	// [ASCII punctuation][A-Za-z]+
	if isASCIIPunct(s[i]) && i+1 < len(s) && isASCIIAlpha(s[i+1]) {
		e := i + 2
		for e < len(s) && isASCIIAlpha(s[e]) {
			e++
		}
		return e
	}
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ : if the rune is itself a letter or
	// mark, with or without it as the prefix the match is the whole run from i.
	if c&(cL|cM) != 0 {
		return runOf(s, i+w, cL|cM)
	}
	if r != '\r' && r != '\n' && c&(cP|cS) == 0 && i+w < len(s) {
		if _, c2, w2 := classAt(s, i+w); c2&(cL|cM) != 0 {
			return runOf(s, i+w+w2, cL|cM)
		}
	}
	//  ?[\p{P}\p{S}]+[\r\n]*
	j := i
	if r == ' ' {
		j = i + 1
	}
	if j < len(s) {
		if _, c2, _ := classAt(s, j); c2&(cP|cS) != 0 {
			return crlfRun(s, runOf(s, j, cP|cS))
		}
	}
	// \s*[\r\n]+|\s+(?!\S)|\s+
	if c&cWS != 0 {
		return whitespaceTail(s, i, true)
	}
	return -1
}
