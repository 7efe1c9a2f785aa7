package tokenizer

import (
	"strings"

	"github.com/smg-go/smg/tokenizer/split"
)

// compileSplit compiles a Split pre-tokenizer's Regex pattern; split refuses
// every pattern it has no hand-written scanner for.
func compileSplit(pattern string) (split.Scanner, error) { return split.Compile(pattern) }

// gpt2Pattern is ByteLevel's use_regex pattern.
const gpt2Pattern = split.PatternGPT2

// literalScanner matches a literal string (a Split with a String pattern).
type literalScanner string

func (l literalScanner) Next(s string, start int) (int, int, bool) {
	if start >= len(s) {
		return 0, 0, false
	}
	j := strings.Index(s[start:], string(l))
	if j < 0 {
		return 0, 0, false
	}
	return start + j, start + j + len(l), true
}
