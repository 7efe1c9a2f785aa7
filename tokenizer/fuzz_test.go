package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLoad: LoadJSON never panics; whatever loads encodes and decodes
// without panicking, and byte-level tokenizers round-trip.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"bytelevel", "metaspace", "fallback"} {
		b, err := os.ReadFile(filepath.Join("testdata", "small", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "hello world<|end|> <tool> x")
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}}`), "abab")
	f.Add([]byte(`{"model":{"vocab":{},"merges":[]},"added_tokens":[{"id":0,"content":"x","special":true}]}`), "xxx")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tk, err := LoadJSON(data, nil, nil)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cannot load tokenizer: ") {
				t.Fatalf("error without the prefix: %v", err)
			}
			return
		}
		ids := tk.Encode(nil, text, true)
		out := tk.Decode(nil, ids, false)
		_ = tk.Decode(nil, ids, true)
		if !utf8.Valid(out) {
			t.Fatalf("Decode gave invalid UTF-8 %q", out)
		}
	})
}

// FuzzGolden: for a golden line picked by index, with the text mutated,
// Encode and Decode never panic, Decode is valid UTF-8, byte-level
// families round-trip valid text, and the unmutated line still gives the
// golden ids.
func FuzzGolden(f *testing.F) {
	f.Add(uint8(0), uint16(0), "")
	f.Add(uint8(1), uint16(17), "<|end_of_text|>")
	f.Add(uint8(2), uint16(99), " \u2581<s>")
	f.Add(uint8(3), uint16(1234), "\xff\xfe")
	f.Fuzz(func(t *testing.T, fam uint8, line uint16, insert string) {
		name := families[int(fam)%len(families)]
		tk := family(t, name)
		lines := readGolden(t, name)
		l := lines[int(line)%len(lines)]
		if got := tk.Encode(nil, l.Text, false); !eqIDs(got, l.IDs) {
			t.Fatalf("%s %q: ids %v, want %v", name, l.Text, got, l.IDs)
		}
		pos := 0
		if len(l.Text) > 0 {
			pos = int(line) % (len(l.Text) + 1)
		}
		text := l.Text[:pos] + insert + l.Text[pos:]
		ids := tk.Encode(nil, text, true)
		if got := tk.Encode(nil, text, true); !eqIDs(got, ids) {
			t.Fatalf("%s %q: encode not deterministic", name, text)
		}
		out := tk.Decode(nil, ids, false)
		if !utf8.Valid(out) {
			t.Fatalf("%s: Decode gave invalid UTF-8 %q", name, out)
		}
		if name != "llama2" && utf8.ValidString(text) {
			out = tk.Decode(nil, tk.Encode(nil, text, false), false)
			if string(out) != text {
				t.Fatalf("%s: decode(encode(%q)) = %q", name, text, out)
			}
		}
	})
}
