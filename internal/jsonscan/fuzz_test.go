package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// fuzzSeeds cover every token, every escape, unicode and invalid UTF-8, strings around the
// 16-byte fast path and the 64-byte control scan, and the failures near each of them.
var fuzzSeeds = []string{
	`{}`, `[]`, ` {"a":1} `, `"s"`, `0`, `-0`, `1.5e-3`, `true`, `false`, `null`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`,
	`{"a":[0,-0,1.5,-1.5e10,1E+2,2e-3,123456789012345678901234567890,true,false,null,"s",{},[],[[]],{"x":{}}]}`,
	`"0123456789abcde"`, `"0123456789abcdef"`, `"0123456789abcdefg"`, `"0123456789abcdef\"x"`,
	`"caf\u00e9 \ud83d\ude00 \ud83d \ude00 \udc00\u0041 \"q\" \\ \/ \b\f\n\r\t"`,
	`"\ud83d\ud83d\ude00"`, `"\uD83D\uDE00"`, `"s\u0074ream"`,
	"\"bad \xff utf8 \xc3\x28 \xed\xa0\x80 ok \xe2\x82\xac\"",
	"\"ctl \x01\"", "\"" + strings.Repeat("x", 70) + "\x1f\"", "\"" + strings.Repeat("y", 70) + "\\n\x7f\"",
	`01`, `1.`, `.5`, `-`, `1e`, `1e+`, `tru`, `nul`, `"\x"`, `"\u12"`, `"\u12`, `"abc`, `"a\`,
	`{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":1}}`, `{"a":1} x`, `{"a":1`, `{1:2}`, `[1}`, `{"a":1]`,
	`[` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `]`,
	strings.Repeat(`{"b":`, 100) + `1` + strings.Repeat("}", 100),
}

// FuzzScan checks SkipValue against json.Valid on acceptance, String and AppendString
// against each other and against json.Unmarshal on the decoded value, and EqualUnescaped
// against the decoded value. Positions must stay within the text.
func FuzzScan(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	var st Stack
	f.Fuzz(func(t *testing.T, text []byte) {
		orig := string(text)
		at, k := SkipValue(text, 0, 0, &st)
		if at < 0 || at > len(text) {
			t.Fatalf("SkipValue(%q) position %d out of range", text, at)
		}
		ok := k == OK && SkipWS(text, at) == len(text)
		if ok != json.Valid(text) {
			t.Fatalf("SkipValue(%q) = %d, %d; json.Valid says %v", text, at, k, !ok)
		}

		i := SkipWS(text, 0)
		if i < len(text) && text[i] == '"' {
			checkString(t, text, i)
		}
		if string(text) != orig {
			t.Fatal("text modified")
		}
	})
}

func checkString(t *testing.T, text []byte, i int) {
	pos, escaped, k := String(text, i)
	dst, pos2, escaped2, k2 := AppendString([]byte("p"), text, i)
	if k != k2 || pos != pos2 || (k == OK && escaped != escaped2) {
		t.Fatalf("String(%q) = %d, %v, %d; AppendString %d, %v, %d", text, pos, escaped, k, pos2, escaped2, k2)
	}
	if k != OK {
		if pos < 0 || pos > len(text) {
			t.Fatalf("String(%q) failure position %d out of range", text, pos)
		}
		if json.Valid(text[i:]) {
			t.Fatalf("String(%q) = %d at %d, but encoding/json accepts the text", text, k, pos)
		}
		return
	}
	var want string
	if err := json.Unmarshal(text[i:pos], &want); err != nil {
		t.Fatalf("String(%q) accepted %q, encoding/json: %v", text, text[i:pos], err)
	}
	raw := text[i+1 : pos-1]
	if escaped != (bytes.IndexByte(raw, '\\') >= 0) {
		t.Fatalf("String(%q) escaped = %v", text, escaped)
	}
	got := string(dst[1:])
	if un := string(AppendUnescaped(nil, raw)); escaped && un != got || !escaped && got != string(raw) {
		t.Fatalf("AppendString(%q) = %q, AppendUnescaped %q", text, got, un)
	}
	// encoding/json replaces each byte of invalid UTF-8 with U+FFFD; we pass it through,
	// and converting to runes makes the same replacement.
	if string([]rune(got)) != want {
		t.Fatalf("AppendString(%q) = %q, encoding/json %q", text, got, want)
	}
	if !EqualUnescaped(raw, got) || EqualUnescaped(raw, got+"x") || len(got) > 0 && EqualUnescaped(raw, got[:len(got)-1]) {
		t.Fatalf("EqualUnescaped(%q) disagrees with the decoded %q", raw, got)
	}
}
