package tokenizer

import (
	"math/rand/v2"
	"testing"
)

// TestFusedDecoderMatchesTheChain: llama2's one-pass decoder gives what its decoder chain
// (Replace, ByteFallback, Fuse, Strip) gives step by step, on random id lists that mix byte
// tokens (valid and invalid UTF-8 runs), "▁" words and special tokens.
func TestFusedDecoderMatchesTheChain(t *testing.T) {
	tk := family(t, "llama2")
	if tk.fusedDec == nil {
		t.Fatal("llama2's decoder chain did not take the one-pass decoder")
	}
	fused := tk.fusedDec
	r := rand.New(rand.NewPCG(3, 4))
	pick := func() uint32 {
		switch r.IntN(4) {
		case 0:
			return uint32(3 + r.IntN(256)) // <0x00>..<0xFF>
		case 1:
			return uint32(r.IntN(3)) // <unk>, <s>, </s>
		default:
			return uint32(r.IntN(tk.VocabSize()))
		}
	}
	var a, b []byte
	for i := range 20000 {
		ids := make([]uint32, r.IntN(12))
		for j := range ids {
			ids[j] = pick()
		}
		skip := i%2 == 0
		tk.fusedDec = fused
		a = tk.Decode(append(a[:0], "prefix"...), ids, skip)
		tk.fusedDec = nil
		b = tk.Decode(append(b[:0], "prefix"...), ids, skip)
		if string(a) != string(b) {
			tk.fusedDec = fused
			t.Fatalf("ids %v skip=%v: one pass %q, chain %q", ids, skip, a, b)
		}
	}
	tk.fusedDec = fused
	for _, fam := range []string{"qwen3", "llama3", "deepseek_v3"} {
		if family(t, fam).fusedDec != nil {
			t.Errorf("%s: byte-level decoder took the one-pass Metaspace decoder", fam)
		}
	}
}
