package tokenizer

import (
	"sync"
	"testing"
	"unicode/utf8"
)

// TestRoundTrip: for the byte-level families, decoding the ids of any
// valid string gives the string back, with or without special tokens
// spelled in it.
func TestRoundTrip(t *testing.T) {
	for _, fam := range []string{"qwen3", "llama3", "deepseek_v3"} {
		tk := family(t, fam)
		var ids []uint32
		var out []byte
		n := 0
		for _, l := range readGolden(t, fam) {
			if !utf8.ValidString(l.Text) {
				continue
			}
			ids = tk.Encode(ids[:0], l.Text, false)
			out = tk.Decode(out[:0], ids, false)
			if string(out) != l.Text {
				t.Errorf("%s: decode(encode(%q)) = %q", fam, l.Text, out)
			}
			n++
		}
		if n < 1000 {
			t.Errorf("%s: only %d strings", fam, n)
		}
	}
}

// TestConcurrentEncode: goroutines sharing a Tokenizer (and its word cache
// and scratch pool) get the golden ids (run with -race).
func TestConcurrentEncode(t *testing.T) {
	for _, fam := range families {
		tk := family(t, fam)
		lines := readGolden(t, fam)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ids []uint32
				for i := g; i < len(lines); i += 7 {
					ids = tk.Encode(ids[:0], lines[i].Text, true)
					if !eqIDs(ids, lines[i].IDsSpecial) {
						t.Errorf("%s line %d: concurrent encode differs", fam, i+1)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
