package split

// gpt4 implements PatternQwen2 (maxDigits 1) and PatternLlama3 (maxDigits 3):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Every rune is a letter, a number, whitespace or none of those, so some
// alternative matches at every position: matches tile the text, no gaps.
type gpt4 struct{ maxDigits int }

func (g gpt4) Next(s string, start int) (int, int, bool) {
	for i := start; i < len(s); i += nextRune(s, i) {
		if e := g.matchAt(s, i); e >= 0 {
			return i, e, true
		}
	}
	return 0, 0, false
}

// matchAt returns the end of the match anchored at i, or -1.
func (g gpt4) matchAt(s string, i int) int {
	r, c, w := classAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if e := contraction(s, i+1, true); e >= 0 {
			return e
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+ : a letter cannot be the optional prefix, so a
	// letter here starts a plain letter run.
	if c&cL != 0 {
		return runOf(s, i+w, cL)
	}
	if r != '\r' && r != '\n' && c&cN == 0 && i+w < len(s) {
		if _, c2, w2 := classAt(s, i+w); c2&cL != 0 {
			return runOf(s, i+w+w2, cL)
		}
	}
	// \p{N}{1,maxDigits}
	if c&cN != 0 {
		e := i + w
		for k := 1; k < g.maxDigits && e < len(s); k++ {
			_, c2, w2 := classAt(s, e)
			if c2&cN == 0 {
				break
			}
			e += w2
		}
		return e
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]* : with the space if one follows it, else
	// without (a space itself is \s, so then it fails).
	j := i
	if r == ' ' {
		j = i + 1
	}
	if j < len(s) {
		if _, c2, _ := classAt(s, j); c2&(cWS|cL|cN) == 0 {
			return crlfRun(s, runNot(s, j, cWS|cL|cN))
		}
	}
	// \s*[\r\n]+|\s+(?!\S)|\s+
	if c&cWS != 0 {
		return whitespaceTail(s, i, true)
	}
	return -1
}
