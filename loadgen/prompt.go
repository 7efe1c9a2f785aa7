package loadgen

import (
	"math"
	"math/rand/v2"
	"strings"
)

// vocabulary holds short, common English words: each is a single token in the BPE
// vocabularies of the usual model families, so a prompt of n words is close to n tokens.
// bench_serving samples token ids and detokenises them; without a tokenizer, words are the
// nearest honest stand-in, and servers report the exact count in "usage" anyway.
var vocabulary = strings.Fields(`
the of and to in is was for that with as on by at from his her an be this which or had are
but not have were they one all their has its been who more when would there can will new
also other after first into time two some about only over could than them these may most
made then any year such many where between through under well state during world life
part long three city while being four last both since down great later known same each work
day high small school very people south north east west early music film team water game
land house found place still light book group power line river point story field`)

// prompt generates deterministic synthetic text: words drawn from vocabulary.
type prompt struct{ rng *rand.Rand }

// newPrompt seeds a text source. Streams with different (seed, stream) pairs are independent.
func newPrompt(seed int64, stream uint64) prompt {
	return prompt{rng: rand.New(rand.NewPCG(uint64(seed), stream))}
}

// appendWords appends n space-separated words to dst.
func (p prompt) appendWords(dst []byte, n int) []byte {
	for i := range n {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, vocabulary[p.rng.IntN(len(vocabulary))]...)
	}
	return dst
}

// words returns n words as a string.
func (p prompt) words(n int) string {
	return string(p.appendWords(make([]byte, 0, n*6), n))
}

// drawLen draws a length with mean or maximum n from distribution d.
func drawLen(rng *rand.Rand, d LengthDistribution, n int, ratio float64) int {
	if d == LengthExponential {
		return min(max(1, int(math.Ceil(rng.ExpFloat64()*float64(n)))), 8*n)
	}
	return uniformLen(rng, n, ratio)
}

// uniformLen draws a length uniformly from [max(1, floor(n*ratio)), n], bench_serving's rule.
func uniformLen(rng *rand.Rand, n int, ratio float64) int {
	lo := max(1, int(float64(n)*ratio))
	if lo >= n {
		return n
	}
	return lo + rng.IntN(n-lo+1)
}
