package kvindex

import "testing"

// The expected values are the reference xxHash's (libxxhash through python3-xxhash,
// xxh3_64_intdigest(..., seed=1337)), the function the spec product's index uses.
func TestHashesMatchReferenceXXH3(t *testing.T) {
	if got, want := ContentHash([]uint32{1, 2, 3, 4}), uint64(14643705804678351452); got != want {
		t.Errorf("ContentHash(1,2,3,4) = %d, want %d", got, want)
	}
	var toks []uint32
	for i := uint32(100); i < 116; i++ {
		toks = append(toks, i)
	}
	if got, want := ContentHash(toks), uint64(10823191264391160519); got != want {
		t.Errorf("ContentHash(100..115) = %d, want %d", got, want)
	}
	if got, want := PrefixHash(0x1234, 0x5678), uint64(11639001473065316260); got != want {
		t.Errorf("PrefixHash(0x1234, 0x5678) = %d, want %d", got, want)
	}
	if ContentHash(toks) != contentHashPortable(toks) {
		t.Error("the in-place and the portable content hashes differ")
	}
}

func TestPrefixHashesChainFullBlocks(t *testing.T) {
	toks := make([]uint32, 37)
	for i := range toks {
		toks[i] = uint32(i * 7)
	}
	got := PrefixHashes(nil, toks, 16)
	if len(got) != 2 {
		t.Fatalf("%d hashes for 37 tokens in blocks of 16, want 2", len(got))
	}
	c0, c1 := ContentHash(toks[:16]), ContentHash(toks[16:32])
	if got[0] != c0 || got[1] != PrefixHash(c0, c1) {
		t.Fatalf("hashes %x, want [%x %x]", got, c0, PrefixHash(c0, c1))
	}
	if PrefixHashes(nil, toks, 0) != nil {
		t.Fatal("block size 0 must give no hashes")
	}
}
