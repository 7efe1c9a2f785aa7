//go:build !race

package jsonscan

import (
	"strings"
	"testing"
)

// TestAllocs: scanning allocates nothing, on success or failure, and decoding allocates
// nothing into a buffer with capacity.
func TestAllocs(t *testing.T) {
	text := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("long text \\n ", 40) +
		`\ud83d\ude00"},{"n":[1,-2.5e3,true,false,null]}],"s\u0074ream":true}`)
	bad := []byte(`{"a":[1,2}`)
	esc := []byte(`line\none \ud83d\ude00 caf\u00e9`)
	content := strings.Index(string(text), `"user","content":"`) + len(`"user","content":`)
	var st Stack
	dst := make([]byte, 0, 1024)
	if at, k := SkipValue(text, 0, 0, &st); k != OK || at != len(text) {
		t.Fatalf("SkipValue: %d, %d", at, k)
	}
	if _, _, escaped, k := AppendString(dst[:0], text, content); k != OK || !escaped {
		t.Fatalf("AppendString at %d: %d", content, k)
	}
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"SkipValue", func() { SkipValue(text, 0, 0, &st) }},
		{"SkipValue error", func() { SkipValue(bad, 0, 0, &st) }},
		{"AppendString", func() { AppendString(dst[:0], text, content) }},
		{"AppendUnescaped", func() { AppendUnescaped(dst[:0], esc) }},
		{"EqualUnescaped", func() { EqualUnescaped(esc, "line\none 😀 café") }},
	} {
		c.f()
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", c.name, n)
		}
	}
}
