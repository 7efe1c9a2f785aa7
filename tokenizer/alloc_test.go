//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation
// counts are only meaningful without it.

package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestEncodeZeroAllocs: a warm Encode (words in the cache) and a cold one
// (pieces too long to be cached, so every word goes through the merge loop,
// the heap path included) allocate nothing.
func TestEncodeZeroAllocs(t *testing.T) {
	warm := benchText(t, 4<<10)
	r := rand.New(rand.NewPCG(1, 2))
	var cold []string
	for i := 0; i < 64; i++ {
		var b strings.Builder
		for w := 0; w < 20; w++ {
			n := 33 + r.IntN(100) // over cacheKeyMax; over 64 bytes takes the heap path
			for j := 0; j < n; j++ {
				b.WriteByte(byte('a' + r.IntN(26)))
			}
			b.WriteString(" ")
		}
		b.WriteString("cafe\u0301 ﬁ Ａｂｃ") // not NFC/NFKC: the normalizers rewrite it
		cold = append(cold, b.String())
	}
	for _, fam := range families {
		tk := family(t, fam)
		dst := make([]uint32, 0, 1<<16)
		for _, addSpecial := range []bool{false, true} {
			for _, s := range append([]string{warm}, cold...) {
				dst = tk.Encode(dst[:0], s, addSpecial) // grow the scratch buffers
			}
			if n := testing.AllocsPerRun(50, func() { dst = tk.Encode(dst[:0], warm, addSpecial) }); n != 0 {
				t.Errorf("%s warm addSpecial=%v: %v allocs per Encode", fam, addSpecial, n)
			}
			i := 0
			if n := testing.AllocsPerRun(50, func() { dst = tk.Encode(dst[:0], cold[i%len(cold)], addSpecial); i++ }); n != 0 {
				t.Errorf("%s cold addSpecial=%v: %v allocs per Encode", fam, addSpecial, n)
			}
		}
		// The cold texts are all long words: each is really merged, not cached.
		if got := tk.Encode(nil, cold[0], false); len(got) < 20 {
			t.Errorf("%s: cold text gave %d ids", fam, len(got))
		}
	}
}

// TestDecodeZeroAllocs: Decode into a buffer with room allocates nothing, for the byte-level
// families and for the Metaspace + byte-fallback one alike.
func TestDecodeZeroAllocs(t *testing.T) {
	text := benchText(t, 4<<10)
	for _, fam := range families {
		tk := family(t, fam)
		ids := tk.Encode(nil, text, true)
		dst := make([]byte, 0, 64<<10)
		for _, skip := range []bool{false, true} {
			if n := testing.AllocsPerRun(50, func() { dst = tk.Decode(dst[:0], ids, skip) }); n != 0 {
				t.Errorf("%s skip=%v: %v allocs per Decode", fam, skip, n)
			}
		}
	}
}
