package jsonx

import (
	"encoding/json"
	"testing"
)

func FuzzAppendStringMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\n\r\t\x00\x1f", "héllo ✓ 😀", "\xff\xfe bad utf8", "</script>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q encoded as invalid JSON %q: %v", s, out, err)
		}
		// encoding/json decodes to what it would have encoded: invalid UTF-8 as U+FFFD.
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q round-trips to %q, encoding/json to %q", s, back, wantBack)
		}
	})
}

func TestAppendStringDoesNotAllocateWithCapacity(t *testing.T) {
	buf := make([]byte, 0, 256)
	if a := testing.AllocsPerRun(100, func() { buf = AppendString(buf[:0], "a \"quoted\"\n line ✓") }); a != 0 {
		t.Fatalf("%v allocs", a)
	}
}
