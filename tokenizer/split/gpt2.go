package split

// gpt2 implements PatternGPT2:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Like gpt4 it matches at every position. The contractions are case-sensitive.
type gpt2 struct{}

func (gpt2) Next(s string, start int) (int, int, bool) {
	for i := start; i < len(s); i += nextRune(s, i) {
		if e := gpt2MatchAt(s, i); e >= 0 {
			return i, e, true
		}
	}
	return 0, 0, false
}

func gpt2MatchAt(s string, i int) int {
	r, c, _ := classAt(s, i)
	if r == '\'' {
		if e := contraction(s, i+1, false); e >= 0 {
			return e
		}
	}
	// The optional space is taken when what follows fits the class; without it,
	// the space itself never fits \p{L}, \p{N} or [^\s\p{L}\p{N}]. The three
	// classes are disjoint, so testing them in any order picks the same
	// alternative.
	j := i
	if r == ' ' {
		j = i + 1
	}
	if j < len(s) {
		_, c2, w2 := classAt(s, j)
		switch {
		case c2&cL != 0:
			return runOf(s, j+w2, cL)
		case c2&cN != 0:
			return runOf(s, j+w2, cN)
		case c2&(cWS|cL|cN) == 0:
			return runNot(s, j, cWS|cL|cN)
		}
	}
	if c&cWS != 0 {
		return whitespaceTail(s, i, false)
	}
	return -1
}
