package split

import (
	"testing"
	"unicode/utf8"
)

// fuzzSeeds seeds every fuzz target: hand-picked edge cases plus fragments.
func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		"", "Hello world", "a   b", "a \n\n  b", "x   ", "I'M HE'LL it'S x'ſ", "'sa", "!!!\n\nab", " !!\r\n",
		"\u3000中文", "12345", "٣٤٥Ⅻ6", ".NET 'hello é", "e\u0301\u0301 \u0301", "👨\u200d👩\u200d👧 ok",
		"if (x != 0) {\n\treturn -1;\n}", "\u00a0\u2028\u0085 \t\v\f", "中文かなカナ龦x",
	} {
		f.Add(s)
	}
	for _, s := range genCorpus(50, 3) {
		f.Add(s)
	}
}

// fuzzPattern compares the scanner for pattern with regexp2 on valid UTF-8,
// and checks that invalid input still yields pieces tiling it.
func fuzzPattern(f *testing.F, pattern string) {
	fuzzSeeds(f)
	sc := mustCompile(f, pattern)
	re := compileRef(f, pattern)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			n := 0
			it := NewPieces(sc, s)
			for start, end, _, ok := it.Next(); ok; start, end, _, ok = it.Next() {
				if start != n || end <= start {
					t.Fatalf("%q: bad piece [%d,%d) after %d", s, start, end, n)
				}
				n = end
			}
			if n != len(s) {
				t.Fatalf("%q: pieces cover %d of %d bytes", s, n, len(s))
			}
			return
		}
		diff(t, "fuzz", sc, re, s)
	})
}

func FuzzQwen2(f *testing.F)          { fuzzPattern(f, PatternQwen2) }
func FuzzLlama3(f *testing.F)         { fuzzPattern(f, PatternLlama3) }
func FuzzGPT2(f *testing.F)           { fuzzPattern(f, PatternGPT2) }
func FuzzDeepSeekDigits(f *testing.F) { fuzzPattern(f, PatternDeepSeekDigits) }
func FuzzDeepSeekCJK(f *testing.F)    { fuzzPattern(f, PatternDeepSeekCJK) }
func FuzzDeepSeekWords(f *testing.F)  { fuzzPattern(f, PatternDeepSeekWords) }
