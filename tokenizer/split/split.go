package split

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The patterns this package implements, exactly as they appear in tokenizer.json
// after JSON decoding (Split pre-tokenizer, "pattern": {"Regex": ...}).
const (
	// PatternQwen2 is the Split regex of Qwen2, Qwen2.5 and Qwen3.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternLlama3 is the Split regex of Llama 3 (OpenAI's cl100k_base, GPT-4):
	// PatternQwen2 with \p{N}{1,3} in place of \p{N}.
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternGPT2 is the regex built into the ByteLevel pre-tokenizer (used when
	// its "use_regex" is true); it never appears in tokenizer.json itself.
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// PatternDeepSeekDigits is the first of DeepSeek V3's three Splits.
	PatternDeepSeekDigits = `\p{N}{1,3}`
	// PatternDeepSeekCJK is the second: runs of CJK unified ideographs
	// U+4E00–U+9FA5, hiragana U+3040–U+309F and katakana U+30A0–U+30FF.
	PatternDeepSeekCJK = `[一-龥぀-ゟ゠-ヿ]+`
	// PatternDeepSeekWords is the third. tokenizer.json spells its \r and \n
	// as literal CR and LF characters; Compile accepts either spelling.
	PatternDeepSeekWords = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// Scanner finds the matches of one Split pattern. Implementations are stateless,
// safe for concurrent use, and never allocate.
type Scanner interface {
	// Next returns the leftmost match s[matchStart:matchEnd] with
	// matchStart >= start, exactly as fancy-regex's find_at(s, start) would
	// (leftmost-first alternation with backtracking). ok is false when there is
	// no match at or after start (and always when start >= len(s)).
	//
	// start must be a rune boundary of s. Matches are never empty
	// (matchEnd > matchStart), and none of the patterns looks behind start, so
	// calling Next again from the previous matchEnd walks all matches the way
	// find_iter does. s is meant to be valid UTF-8; an invalid byte is treated as
	// a one-byte character outside every class (no panic, no stall).
	Next(s string, start int) (matchStart, matchEnd int, ok bool)
}

// canonical maps each accepted spelling (after canon) to its scanner.
var scanners = map[string]Scanner{
	canon(PatternQwen2):                                 gpt4{maxDigits: 1},
	canon(PatternLlama3):                                gpt4{maxDigits: 3},
	canon(PatternGPT2):                                  gpt2{},
	canon(PatternDeepSeekDigits):                        digits{},
	canon(PatternDeepSeekCJK):                           cjk{},
	canon(`[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+`): cjk{},
	canon(`[\x{4e00}-\x{9fa5}\x{3040}-\x{309f}\x{30a0}-\x{30ff}]+`): cjk{},
	canon(PatternDeepSeekWords):                                     deepseek{},
}

// canon rewrites literal CR and LF as the escapes \r and \n, which mean the
// same inside and outside a character class (none of these patterns uses the x
// flag).
func canon(p string) string {
	if strings.ContainsAny(p, "\r\n") {
		p = strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(p)
	}
	return p
}

// Compile returns the Scanner for a Split pattern from tokenizer.json (the
// decoded "Regex" string), or an error naming the pattern when it is not one
// this package implements. The comparison is exact except that literal CR/LF
// and the escapes \r/\n are interchangeable.
func Compile(pattern string) (Scanner, error) {
	sc, ok := scanners[canon(pattern)]
	if !ok {
		return nil, fmt.Errorf("split pattern %q is not supported: tokenizer/split implements only the Qwen2/Qwen3, Llama 3 (cl100k), GPT-2 ByteLevel and DeepSeek V3 patterns byte for byte; a new pattern needs a hand-written scanner there (with a differential test against regexp2)", pattern)
	}
	initTables()
	return sc, nil
}

// Pieces walks s the way the Split pre-tokenizer with behavior "Isolated" (and
// invert false) cuts it: every match is a piece, and every non-empty stretch
// between matches (a gap) is a piece too. Pieces is a plain value; it does not
// allocate.
//
//	it := split.NewPieces(sc, s)
//	for start, end, _, ok := it.Next(); ok; start, end, _, ok = it.Next() {
//		use(s[start:end])
//	}
type Pieces struct {
	sc      Scanner
	s       string
	pos     int // start of the next piece
	ms, me  int // a match found behind a gap, returned next
	pending bool
}

// NewPieces returns an iterator over the pieces of s.
func NewPieces(sc Scanner, s string) Pieces {
	return Pieces{sc: sc, s: s}
}

// Next returns the next piece s[start:end]; match is true for a match of the
// pattern and false for a gap. ok is false once s is exhausted. Pieces are
// non-empty, in order, and together cover s exactly.
func (p *Pieces) Next() (start, end int, match, ok bool) {
	if p.pending {
		p.pending = false
		p.pos = p.me
		return p.ms, p.me, true, true
	}
	if p.pos >= len(p.s) {
		return 0, 0, false, false
	}
	ms, me, found := p.sc.Next(p.s, p.pos)
	if !found {
		start = p.pos
		p.pos = len(p.s)
		return start, len(p.s), false, true
	}
	if ms > p.pos {
		p.ms, p.me, p.pending = ms, me, true
		start = p.pos
		p.pos = ms
		return start, ms, false, true
	}
	p.pos = me
	return ms, me, true, true
}

// contraction matches the tail of 's|'t|'re|'ve|'m|'ll|'d at s[j:] (just past
// the apostrophe) and returns its end, or -1. With fold it is (?i:...) under
// Unicode simple case folding, where s also matches U+017F LATIN SMALL LETTER
// LONG S; no other letter of s, t, r, e, v, m, l, d has a non-ASCII fold.
func contraction(s string, j int, fold bool) int {
	if j >= len(s) {
		return -1
	}
	c := s[j]
	if fold {
		if c == 0xC5 && j+1 < len(s) && s[j+1] == 0xBF { // ſ U+017F
			return j + 2
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
	}
	switch c {
	case 's', 't', 'm', 'd':
		return j + 1
	case 'r', 'v', 'l':
		if j+1 < len(s) {
			n := s[j+1]
			if fold && 'A' <= n && n <= 'Z' {
				n += 'a' - 'A'
			}
			if (c == 'l' && n == 'l') || (c != 'l' && n == 'e') {
				return j + 2
			}
		}
	}
	return -1
}

// runNot returns the end of the longest run starting at i of runes whose class
// does not intersect mask (invalid bytes included).
func runNot(s string, i int, mask uint8) int {
	for i < len(s) {
		b := s[i]
		if b < utf8.RuneSelf {
			if bmp[b]&mask != 0 {
				return i
			}
			i++
			continue
		}
		_, c, w := classAt(s, i)
		if c&mask != 0 {
			return i
		}
		i += w
	}
	return i
}

// nextRune returns the width of the rune at s[i] (1 for an invalid byte).
func nextRune(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return w
}
