package radix

import (
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// textGen writes deterministic English-like text: words from a fixed vocabulary,
// punctuation, and about one non-ASCII character in a hundred, as chat prompts
// carry (accents, typographic quotes, dashes).
type textGen struct {
	rng   *rand.Rand
	words []string
}

var nonASCII = []string{"é", "’", "—", "ü", "“", "”", "ñ", "€"}

func newTextGen(seed uint64) *textGen {
	rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
	g := &textGen{rng: rng}
	vocab := rand.New(rand.NewPCG(7, 7)) // the same vocabulary for every seed
	for range 2048 {
		n := 2 + vocab.IntN(9)
		var b strings.Builder
		for range n {
			b.WriteByte(byte('a' + vocab.IntN(26)))
		}
		g.words = append(g.words, b.String())
	}
	return g
}

// appendChars appends text of exactly n characters to dst.
func (g *textGen) appendChars(dst []byte, n int) []byte {
	for n > 0 {
		var w string
		switch r := g.rng.IntN(100); {
		case r == 0:
			w = nonASCII[g.rng.IntN(len(nonASCII))]
		case r < 8:
			w = ". "
		case r < 14:
			w = ", "
		default:
			w = g.words[g.rng.IntN(len(g.words))] + " "
		}
		if k := utf8.RuneCountInString(w); k <= n {
			dst = append(dst, w...)
			n -= k
			continue
		}
		for _, c := range w {
			if n == 0 {
				break
			}
			dst = utf8.AppendRune(dst, c)
			n--
		}
	}
	return dst
}

// chatTemplates returns six system-prompt prefixes of 200 to 1,200 characters, in
// the shape of common chat templates.
func chatTemplates() [][]byte {
	g := newTextGen(99)
	heads := []string{
		"<|im_start|>system\n",
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n",
		"[INST] <<SYS>>\n",
		"<start_of_turn>user\n",
		"<|system|>\n",
		"### System:\n",
	}
	var out [][]byte
	for i, h := range heads {
		t := append([]byte(h), "You are a helpful assistant. "...)
		t = g.appendChars(t, 200+200*i)
		t = append(t, "\n<|user|>\n"...)
		out = append(out, t)
	}
	return out
}

// prefillEntries returns n prompts of exactly chars characters: a chat template
// (entry i uses template i%6) followed by unique text.
func prefillEntries(n, chars int, seed uint64) [][]byte {
	g := newTextGen(seed)
	templates := chatTemplates()
	out := make([][]byte, n)
	for i := range out {
		t := templates[i%len(templates)]
		e := append(make([]byte, 0, chars*11/10), t...)
		out[i] = g.appendChars(e, chars-countChars(t))
	}
	return out
}

// cutChars returns the byte length of the first n characters of b.
func cutChars(b []byte, n int) int {
	i := 0
	for ; n > 0 && i < len(b); n-- {
		if b[i] < 0x80 {
			i++
			continue
		}
		i++
		for i < len(b) && isCont(b[i]) {
			i++
		}
	}
	return i
}
