package jsonscan

import (
	"encoding/json"
	"testing"
)

// TestEqualUnescaped covers the escape decoding of names against encoding/json's.
func TestEqualUnescaped(t *testing.T) {
	for _, raw := range []string{
		`stre\u0061m`, `\u0073tream`, `strea\u006D`, `stream\u0000`, `\"stream`, `stream\/`, `\/`,
		`\ud83d\ude00`, `\ud83d`, `\ude00\ud83d`, `\ud83dx`, `a\nb`, `a\tb`, `\b\f\r`, `\\`, `caf\u00e9`,
		`\ud83d\u0041`, `\uDBFF\uDFFF`,
	} {
		var dec string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &dec); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{dec, "stream", "", "\uFFFD", "a"} {
			if got := EqualUnescaped([]byte(raw), name); got != (dec == name) {
				t.Errorf("EqualUnescaped(%q, %q) = %v, want %v", raw, name, got, dec == name)
			}
		}
	}
}

// TestAppendUnescaped decodes the same escapes as encoding/json.
func TestAppendUnescaped(t *testing.T) {
	for _, raw := range []string{
		``, `plain`, `stre\u0061m`, `\"\\\/\b\f\n\r\t`, `\ud83d\ude00`, `\ud83d`, `\ude00\ud83d`,
		`\ud83dx`, `\ud83d\u0041`, `\uDBFF\uDFFF`, `caf\u00e9 \u20ac`, `\u0000`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+raw+`"`), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendUnescaped([]byte("p"), []byte(raw))); got != "p"+want {
			t.Errorf("AppendUnescaped(%q) = %q, want %q", raw, got, "p"+want)
		}
	}
}
