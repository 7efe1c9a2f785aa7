package split

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// allPatterns lists every supported pattern under a short name.
var allPatterns = []struct{ name, pattern string }{
	{"qwen2", PatternQwen2},
	{"llama3", PatternLlama3},
	{"gpt2", PatternGPT2},
	{"deepseek_digits", PatternDeepSeekDigits},
	{"deepseek_cjk", PatternDeepSeekCJK},
	{"deepseek_words", PatternDeepSeekWords},
}

// refPattern rewrites a pattern for regexp2 (.NET syntax and semantics:
// backtracking, leftmost-first, \s = Unicode White_Space, \p{..} from Go's
// unicode tables). It differs from HF's engine in two ways, both spelled out
// here: .NET's (?i) does not fold s with U+017F ſ as Rust's simple case folding
// does, so the case-insensitive group is written as classes; and Go's tables
// lack the code points assigned since their Unicode version, so each \p{X} gets
// the overrides of class X added (all overrides are such additions; see
// TestOverridesAreAdditions).
func refPattern(p string) string {
	p = strings.Replace(p, `(?i:'s|'t|'re|'ve|'m|'ll|'d)`,
		`(?:'[sSſ]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`, 1)
	extra := map[string]string{}
	for _, o := range overrides {
		for name, bit := range map[string]uint8{"L": cL, "N": cN, "M": cM, "P": cP, "S": cS} {
			if o.c == bit {
				extra[name] += string(o.lo) + "-" + string(o.hi)
			}
		}
	}
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			if p[i+1] == 'p' && i+2 < len(p) && p[i+2] == '{' {
				end := i + strings.IndexByte(p[i:], '}')
				tok, ex := p[i:end+1], extra[p[i+3:end]]
				switch {
				case ex == "":
					b.WriteString(tok)
				case inClass:
					b.WriteString(tok + ex)
				default:
					b.WriteString("[" + tok + ex + "]")
				}
				i = end
				continue
			}
			b.WriteString(p[i : i+2])
			i++
			continue
		}
		if c == '[' {
			inClass = true
		} else if c == ']' {
			inClass = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// TestOverridesAreAdditions checks what refPattern relies on: every override
// gives exactly one class (never White_Space) to a code point that Go's tables
// leave in none of them.
func TestOverridesAreAdditions(t *testing.T) {
	if len(overrides) == 0 {
		t.Fatal("no overrides")
	}
	for _, o := range overrides {
		if o.c&(o.c-1) != 0 || o.c == 0 || o.c == cWS {
			t.Errorf("override %X-%X has class bits %06b", o.lo, o.hi, o.c)
		}
		for r := o.lo; r <= o.hi; r++ {
			if unicode.In(r, unicode.L, unicode.N, unicode.M, unicode.P, unicode.S, unicode.White_Space) {
				t.Errorf("U+%04X already has a class in Go's tables", r)
			}
		}
	}
}

func compileRef(t testing.TB, p string) *regexp2.Regexp {
	t.Helper()
	re, err := regexp2.Compile(refPattern(p), regexp2.None)
	if err != nil {
		t.Fatalf("regexp2 %q: %v", p, err)
	}
	return re
}

// refMatches returns the byte spans of all matches of re in s (valid UTF-8).
func refMatches(t testing.TB, re *regexp2.Regexp, s string) [][2]int {
	t.Helper()
	off := make([]int, 0, len(s)+1) // rune index -> byte offset
	for i := range s {
		off = append(off, i)
	}
	off = append(off, len(s))
	var out [][2]int
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, [2]int{off[m.Index], off[m.Index+m.Length]})
	}
	if err != nil {
		t.Fatalf("regexp2: %v", err)
	}
	return out
}

// ourMatches returns the byte spans of all matches of sc in s, walking Next
// from each match end as find_iter does.
func ourMatches(sc Scanner, s string) [][2]int {
	var out [][2]int
	for pos := 0; ; {
		ms, me, ok := sc.Next(s, pos)
		if !ok {
			return out
		}
		out = append(out, [2]int{ms, me})
		pos = me
	}
}

// piecesOf returns the Isolated pieces of s as strings.
func piecesOf(sc Scanner, s string) []string {
	var out []string
	it := NewPieces(sc, s)
	for start, end, _, ok := it.Next(); ok; start, end, _, ok = it.Next() {
		out = append(out, s[start:end])
	}
	return out
}

func mustCompile(t testing.TB, p string) Scanner {
	t.Helper()
	sc, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// diff compares sc to re on s and reports the first difference.
func diff(t testing.TB, name string, sc Scanner, re *regexp2.Regexp, s string) bool {
	t.Helper()
	want := refMatches(t, re, s)
	got := ourMatches(sc, s)
	if !slices.Equal(got, want) {
		t.Errorf("%s %q:\n got  %s\n want %s", name, s, spans(s, got), spans(s, want))
		return false
	}
	// Pieces must cover s, alternate correctly with the matches, and be non-empty.
	it := NewPieces(sc, s)
	pos, mi := 0, 0
	for start, end, match, ok := it.Next(); ok; start, end, match, ok = it.Next() {
		if start != pos || end <= start {
			t.Errorf("%s %q: piece [%d,%d) after %d", name, s, start, end, pos)
			return false
		}
		if match {
			if mi >= len(want) || want[mi] != [2]int{start, end} {
				t.Errorf("%s %q: match piece [%d,%d) is not match #%d of %v", name, s, start, end, mi, want)
				return false
			}
			mi++
		} else if mi < len(want) && want[mi][0] < end {
			t.Errorf("%s %q: gap [%d,%d) overlaps match %v", name, s, start, end, want[mi])
			return false
		}
		pos = end
	}
	if pos != len(s) || mi != len(want) {
		t.Errorf("%s %q: pieces end at %d with %d/%d matches", name, s, pos, mi, len(want))
		return false
	}
	return true
}

func spans(s string, sp [][2]int) string {
	var b strings.Builder
	for _, x := range sp {
		fmt.Fprintf(&b, "%q ", s[x[0]:x[1]])
	}
	return b.String()
}

// TestHandPicked pins the semantics worked out by hand (backtracking of
// \s+(?!\S) and \s*[\r\n]+, leftmost-first alternation, case folding).
func TestHandPicked(t *testing.T) {
	cases := []struct {
		pattern, in string
		want        []string
	}{
		{PatternQwen2, "Hello world", []string{"Hello", " world"}},
		{PatternQwen2, "a   b", []string{"a", "  ", " b"}},
		{PatternQwen2, "a \tb", []string{"a", " ", "\tb"}},
		{PatternQwen2, "a \n\n  b", []string{"a", " \n\n", " ", " b"}},
		{PatternQwen2, "x  \n", []string{"x", "  \n"}},
		{PatternQwen2, "x   ", []string{"x", "   "}},
		{PatternQwen2, "a 1", []string{"a", " ", "1"}},
		{PatternQwen2, "12345", []string{"1", "2", "3", "4", "5"}},
		{PatternLlama3, "12345", []string{"123", "45"}},
		{PatternLlama3, "٣٤٥Ⅻ6", []string{"٣٤٥", "Ⅻ6"}},
		{PatternQwen2, "I'M HE'LL it'S x'ſ", []string{"I", "'M", " HE", "'LL", " it", "'S", " x", "'ſ"}},
		{PatternQwen2, "'sa", []string{"'s", "a"}},
		{PatternQwen2, "'x", []string{"'x"}},
		{PatternQwen2, "!!!\n\nab", []string{"!!!\n\n", "ab"}},
		{PatternQwen2, " !!\r\n", []string{" !!\r\n"}},
		{PatternQwen2, "\u3000中文", []string{"\u3000中文"}},
		{PatternQwen2, "\n中文", []string{"\n", "中文"}},
		{PatternQwen2, "a\u00a0 b", []string{"a", "\u00a0", " b"}},
		{PatternGPT2, "I'M it's  x", []string{"I", "'", "M", " it", "'s", " ", " x"}},
		{PatternGPT2, "a\n\nb 12", []string{"a", "\n", "\n", "b", " 12"}},
		{PatternGPT2, "a \n b", []string{"a", " \n", " b"}},
		{PatternDeepSeekDigits, "ab1234c5", []string{"ab", "123", "4", "c", "5"}},
		{PatternDeepSeekCJK, "ab中文かなカナ龦x", []string{"ab", "中文かなカナ", "龦x"}},
		{PatternDeepSeekWords, ".NET 'hello é", []string{".NET", " '", "hello", " é"}},
		{PatternDeepSeekWords, "x\t'hello", []string{"x", "\t", "'hello"}},
		{PatternDeepSeekWords, "'héllo", []string{"'h", "éllo"}},
		{PatternDeepSeekWords, "12ab 3", []string{"1", "2ab", " ", "3"}},
		{PatternDeepSeekWords, "e\u0301\u0301 \u0301", []string{"e\u0301\u0301", " \u0301"}},
		{PatternDeepSeekWords, "x  !!\n\n", []string{"x", " ", " !!\n\n"}},
	}
	for _, c := range cases {
		sc := mustCompile(t, c.pattern)
		if got := piecesOf(sc, c.in); !slices.Equal(got, c.want) {
			t.Errorf("%.20q… on %q:\n got  %q\n want %q", c.pattern, c.in, got, c.want)
		}
		// regexp2 agrees on the hand-derived cases too (it is the oracle below).
		re := compileRef(t, c.pattern)
		diff(t, "regexp2", sc, re, c.in)
	}
}

func TestCompile(t *testing.T) {
	for _, p := range allPatterns {
		if _, err := Compile(p.pattern); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
	// Escaped spellings of the same patterns.
	for _, p := range []string{
		strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(PatternDeepSeekWords),
		`[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+`,
	} {
		if _, err := Compile(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", `\s+`, PatternQwen2 + "|x", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,2}`} {
		_, err := Compile(p)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("Compile(%q) = %v, want an error naming the pattern", p, err)
		}
	}
}

// fragments is the vocabulary of the generated corpus: scripts, contractions,
// code, emoji, marks, whitespace of every kind, numbers of other scripts.
var fragments = []string{
	"Hello", "world", "the", "The", "don't", "I'm", "we'll", "it's", "THEY'RE", "You'VE", "I'D", "'S", "'s", "'ſ", "'t",
	"'re", "'ll", "'lL", "'Ll", "'ve", "'d", "'m", "'", "''", "’s", "’", "ſ", "s", "e", "l", "r", "v",
	"你好世界", "中文分词", "一", "龥", "龦", "𠀀", "こんにちは", "カタカナ", "日本語", "ー", "々", "〆", "゙", "ㄅ",
	"مرحبا", "بالعالم", "٣٤٥", "٠١٢", "안녕하세요", "नमस्ते", "สวัสดี", "Привет", "Ελλάδα", "İ", "ß", "ǅ", "ʰ", "µ",
	"😀", "👨\u200d👩\u200d👧", "👍🏽", "🇺🇸", "e\u0301", "\u0301", "\u20dd", "\U0001d400", "\U00010400", "𝟘", "\U000E0001", "\ue000", "\u0378",
	"func main() {", "x := a+b*3;", "if (x != 0) {\n\treturn -1;\n}", "<|im_start|>", "#include <stdio.h>", "1,234.56",
	"3.14159", "12345678", "7", "Ⅻ", "½", "²", "１２３", "ＡＢＣ",
	" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\r\n", "\n\n", " \n ", "\r", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\U00010D4A\U00010D4B", "\u0897", "\U00010D40", "\u2427", "\U0002EBF0", "\u1C89",
	"\v", "\f", "\u1680", "\u2003", "\u202f", "\u200b", "\u200d", "\ufeff", "\x00", "\x7f", "\x1b", "\u00ad",
	".", ",", "!!!", "...", "?!", "--", "—", "“quoted”", "«»", "$", "€100", "+", "=", "^", "`", "@user", "#tag",
	".NET", "'hello", "_private", "\\n", "/path/to/file", "∑x²", "→", "ℝ", "%", "©", "™", "¿", "、", "。", "！",
}

// genCorpus returns n deterministic test strings.
func genCorpus(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ranges := [][2]rune{{0x20, 0x7e}, {0x00, 0x20}, {0xa0, 0x2ff}, {0x300, 0x36f}, {0x370, 0x7ff}, {0x900, 0xdff}, {0x1100, 0x11ff},
		{0x2000, 0x206f}, {0x2070, 0x2bff}, {0x3000, 0x30ff}, {0x4e00, 0x9fff}, {0xac00, 0xd7a3}, {0xfe00, 0xffff}, {0x10000, 0x1ffff}, {0xe0000, 0xe007f}}
	out := make([]string, 0, n)
	var b strings.Builder
	for range n {
		b.Reset()
		k := 1 + rng.IntN(12)
		for range k {
			if rng.IntN(4) == 0 {
				rg := ranges[rng.IntN(len(ranges))]
				r := rg[0] + rune(rng.IntN(int(rg[1]-rg[0]+1)))
				if utf8.ValidRune(r) {
					b.WriteRune(r)
				}
				continue
			}
			b.WriteString(fragments[rng.IntN(len(fragments))])
		}
		out = append(out, b.String())
	}
	return out
}

// TestDifferentialCorpus compares every pattern with regexp2 on a generated
// multilingual corpus.
func TestDifferentialCorpus(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	corpus := genCorpus(n, 1)
	for _, p := range allPatterns {
		t.Run(p.name, func(t *testing.T) {
			sc, re := mustCompile(t, p.pattern), compileRef(t, p.pattern)
			bad := 0
			for _, s := range corpus {
				if !diff(t, p.name, sc, re, s) {
					if bad++; bad > 10 {
						t.Fatal("too many mismatches")
					}
				}
			}
			t.Logf("%d strings, %d mismatches", len(corpus), bad)
		})
	}
}

// TestDifferentialExhaustive compares with regexp2 on every string of up to 4
// runes over an alphabet chosen to exercise each alternative's boundaries.
func TestDifferentialExhaustive(t *testing.T) {
	alphabet := []string{"'", "s", "L", "e", "ſ", "1", "٣", " ", "\t", "\n", "\r", "\u3000", ".", "\u0301", "中", "\u200d"}
	var all []string
	var rec func(prefix string, depth int)
	rec = func(prefix string, depth int) {
		if depth == 0 {
			return
		}
		for _, a := range alphabet {
			s := prefix + a
			all = append(all, s)
			rec(s, depth-1)
		}
	}
	rec("", 4)
	for _, p := range allPatterns {
		t.Run(p.name, func(t *testing.T) {
			sc, re := mustCompile(t, p.pattern), compileRef(t, p.pattern)
			bad := 0
			for _, s := range all {
				if !diff(t, p.name, sc, re, s) {
					if bad++; bad > 10 {
						t.Fatal("too many mismatches")
					}
				}
			}
			t.Logf("%d strings, %d mismatches", len(all), bad)
		})
	}
}

// TestCaseFoldOrbits checks the claim behind contraction: of the letters in
// the contractions only s has a case-fold partner outside ASCII (U+017F).
func TestCaseFoldOrbits(t *testing.T) {
	for _, c := range "strevmld" {
		var orbit []rune
		for r := c; ; {
			r = unicode.SimpleFold(r)
			if r == c {
				break
			}
			orbit = append(orbit, r)
		}
		want := []rune{c - 'a' + 'A'}
		if c == 's' {
			want = []rune{'ſ', 'S'}
		}
		slices.Sort(orbit)
		slices.Sort(want)
		if !slices.Equal(orbit, want) {
			t.Errorf("fold orbit of %q = %q, want %q", c, orbit, want)
		}
	}
}

// TestInvalidUTF8 checks that invalid bytes neither panic nor stall and that
// pieces still tile the input.
func TestInvalidUTF8(t *testing.T) {
	for _, p := range allPatterns {
		sc := mustCompile(t, p.pattern)
		for _, s := range []string{"\xff", "a\xffb", " \xc5", "'\xc5", "\xe4\xb8", "x\xe4\xb8\xad\xe4", "1\x80 2"} {
			var n int
			it := NewPieces(sc, s)
			for start, end, _, ok := it.Next(); ok; start, end, _, ok = it.Next() {
				if start != n || end <= start {
					t.Fatalf("%s %q: bad piece [%d,%d) after %d", p.name, s, start, end, n)
				}
				n = end
			}
			if n != len(s) {
				t.Errorf("%s %q: pieces cover %d of %d bytes", p.name, s, n, len(s))
			}
		}
	}
}

func TestNoAllocs(t *testing.T) {
	text := strings.Join(genCorpus(200, 7), " ")
	for _, p := range allPatterns {
		sc := mustCompile(t, p.pattern)
		var total int
		allocs := testing.AllocsPerRun(20, func() {
			it := NewPieces(sc, text)
			for _, end, _, ok := it.Next(); ok; _, end, _, ok = it.Next() {
				total = end
			}
			for pos := 0; ; {
				_, me, ok := sc.Next(text, pos)
				if !ok {
					break
				}
				pos = me
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per run, want 0", p.name, allocs)
		}
		if total != len(text) {
			t.Errorf("%s: pieces ended at %d of %d", p.name, total, len(text))
		}
	}
}

// TestRealTokenizerPatterns checks that the Split patterns of the real
// tokenizer.json files (their pre_tokenizer sections, copied to testdata)
// compile and are the exported constants.
func TestRealTokenizerPatterns(t *testing.T) {
	raw, err := os.ReadFile("testdata/pretokenizers.json")
	if err != nil {
		t.Fatal(err)
	}
	var families map[string]struct {
		Pretokenizers []struct {
			Type    string
			Pattern struct{ Regex string }
		}
	}
	if err := json.Unmarshal(raw, &families); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"qwen3":       {PatternQwen2},
		"llama3":      {PatternLlama3},
		"deepseek_v3": {PatternDeepSeekDigits, PatternDeepSeekCJK, PatternDeepSeekWords},
	}
	for fam, w := range want {
		var got []string
		for _, p := range families[fam].Pretokenizers {
			if p.Type == "Split" {
				if _, err := Compile(p.Pattern.Regex); err != nil {
					t.Errorf("%s: %v", fam, err)
				}
				got = append(got, p.Pattern.Regex)
			}
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: Split patterns %q, want %q", fam, got, w)
		}
	}
}

// TestHFGolden compares with Hugging Face tokenizers itself: testdata/hf_golden.json
// holds the Isolated pieces (byte lengths) its Split pre-tokenizer produced for
// 1500 generated texts and each pattern (see testdata/hfgolden.js).
func TestHFGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/hf_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Texts    []string
		Pieces   map[string][][]int
		Patterns map[string]string
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Patterns) != len(allPatterns) {
		t.Fatalf("golden has %d patterns, want %d", len(g.Patterns), len(allPatterns))
	}
	for _, p := range allPatterns {
		if g.Patterns[p.name] != p.pattern {
			t.Errorf("%s: golden pattern %q differs from %q", p.name, g.Patterns[p.name], p.pattern)
			continue
		}
		sc := mustCompile(t, p.pattern)
		lens := g.Pieces[p.name]
		if len(lens) != len(g.Texts) || len(lens) < 1000 {
			t.Fatalf("%s: %d piece lists for %d texts", p.name, len(lens), len(g.Texts))
		}
		bad := 0
		for i, s := range g.Texts {
			var want []string
			pos := 0
			for _, n := range lens[i] {
				want = append(want, s[pos:pos+n])
				pos += n
			}
			if got := piecesOf(sc, s); !slices.Equal(got, want) {
				t.Errorf("%s %q:\n got  %q\n want %q", p.name, s, got, want)
				if bad++; bad > 10 {
					t.FailNow()
				}
			}
		}
	}
}

// TestHFClasses checks the class of every code point against Hugging Face
// tokenizers' regex engine (testdata/hf_classes.json, from hfclasses.js), and
// the case-insensitive contraction letters against what it accepted.
func TestHFClasses(t *testing.T) {
	raw, err := os.ReadFile("testdata/hf_classes.json")
	if err != nil {
		t.Fatal(err)
	}
	var hf struct {
		Classes map[string][][2]rune
		Fold    map[string][]string
	}
	if err := json.Unmarshal(raw, &hf); err != nil {
		t.Fatal(err)
	}
	initTables()
	want := make([]uint8, 0x110000)
	for name, bit := range map[string]uint8{"L": cL, "N": cN, "M": cM, "P": cP, "S": cS, "WS": cWS} {
		if len(hf.Classes[name]) == 0 {
			t.Fatalf("class %s missing", name)
		}
		for _, rg := range hf.Classes[name] {
			for r := rg[0]; r <= rg[1]; r++ {
				want[r] |= bit
			}
		}
	}
	bad := 0
	for r := rune(0); r < 0x110000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		s := string(r)
		if got, c, w := classAt(s, 0); got != r || c != want[r] || w != len(s) {
			t.Errorf("U+%04X: class %06b, HF %06b", r, c, want[r])
			if bad++; bad > 20 {
				t.FailNow()
			}
		}
	}
	// Every "'X…" HF accepted must match the same way here, and nothing else.
	sc := mustCompile(t, PatternQwen2)
	for key, hits := range hf.Fold {
		for _, h := range hits {
			if ms, me, ok := sc.Next(h, 0); !ok || ms != 0 || me != len(h) {
				t.Errorf("fold %s: %q matched [%d,%d) %v, HF matched it whole", key, h, ms, me, ok)
			}
		}
	}
	for _, h := range hf.Fold["1"] {
		if contraction(h, 1, true) != len(h) {
			t.Errorf("contraction(%q) rejects it", h)
		}
	}
	var accepted []string
	for r := rune(0); r < 0x110000; r++ {
		if s := "'" + string(r); contraction(s, 1, true) == len(s) {
			accepted = append(accepted, s)
		}
	}
	slices.Sort(accepted)
	if !slices.Equal(accepted, hf.Fold["1"]) {
		t.Errorf("one-letter contractions %q, HF %q", accepted, hf.Fold["1"])
	}
}
