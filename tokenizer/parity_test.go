package tokenizer

import (
	"fmt"
	"testing"
)

// TestGoldenParity: every golden line's ids (with and without special
// tokens) and both decodes equal Hugging Face tokenizers'.
func TestGoldenParity(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tk := family(t, fam)
			lines := readGolden(t, fam)
			var bad [4]int
			shown := 0
			show := func(format string, args ...any) {
				if shown < 8 {
					t.Errorf(format, args...)
				}
				shown++
			}
			for i, l := range lines {
				if got := tk.Encode(nil, l.Text, false); !eqIDs(got, l.IDs) {
					bad[0]++
					show("line %d %q: ids\n got  %v\n want %v", i+1, l.Text, got, l.IDs)
				}
				if got := tk.Encode(nil, l.Text, true); !eqIDs(got, l.IDsSpecial) {
					bad[1]++
					show("line %d %q: ids_special\n got  %v\n want %v", i+1, l.Text, got, l.IDsSpecial)
				}
				if got := string(tk.Decode(nil, l.IDsSpecial, false)); got != l.Decoded {
					bad[2]++
					show("line %d: decoded\n got  %q\n want %q", i+1, got, l.Decoded)
				}
				if got := string(tk.Decode(nil, l.IDsSpecial, true)); got != l.DecodedSkip {
					bad[3]++
					show("line %d: decoded_skip\n got  %q\n want %q", i+1, got, l.DecodedSkip)
				}
			}
			msg := fmt.Sprintf("%s: %d lines; mismatches ids=%d ids_special=%d decoded=%d decoded_skip=%d",
				fam, len(lines), bad[0], bad[1], bad[2], bad[3])
			if bad != [4]int{} {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
		})
	}
}

// TestMergePathsAgree: the heap merge and the linear merge, and Llama 2's
// cut at "▁" runs and its whole-segment merge, give the same ids (the
// goldens are re-checked with each shortcut off).
func TestMergePathsAgree(t *testing.T) {
	if !family(t, "llama2").spaceSplit {
		t.Fatal("llama2: spaceSplit not enabled")
	}
	if family(t, "qwen3").spaceSplit {
		t.Fatal("qwen3: spaceSplit enabled with a pre-tokenizer")
	}
	text := benchText(t, 100<<10)
	for _, fam := range families {
		tk := family(t, fam)
		want := tk.Encode(nil, text, true)
		tk.cache.reset()
		smallWordMax = 0
		got := tk.Encode(nil, text, true)
		smallWordMax = 64
		if !eqIDs(got, want) {
			t.Errorf("%s: heap merge differs from linear merge", fam)
		}
		tk.cache.reset()
		split := tk.spaceSplit
		tk.spaceSplit = false
		got = tk.Encode(nil, text, true)
		for _, l := range readGolden(t, fam) {
			if ids := tk.Encode(nil, l.Text, true); !eqIDs(ids, l.IDsSpecial) {
				t.Errorf("%s without the space cut: %q gives %v, want %v", fam, l.Text, ids, l.IDsSpecial)
				break
			}
		}
		tk.spaceSplit = split
		tk.cache.reset()
		if !eqIDs(got, want) {
			t.Errorf("%s: whole-segment merge differs from the cut at spaces", fam)
		}
	}
}
