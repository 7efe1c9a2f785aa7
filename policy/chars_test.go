package policy_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/smg-go/smg/policy"
)

func TestCountChars(t *testing.T) {
	for _, s := range []string{"", "a", "héllo wörld", "日本語のテキストです", strings.Repeat("ab€", 100), "\xff\xfe", "abcdefgh\xe2\x82"} {
		if got, want := policy.CountChars([]byte(s)), utf8.RuneCount([]byte(s)); utf8.ValidString(s) && got != want {
			t.Errorf("CountChars(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzCountChars(f *testing.F) {
	for _, s := range []string{"", "héllo", "日本語", "\x80\x80", strings.Repeat("x€", 9)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := 0
		for _, c := range b {
			if c&0xC0 != 0x80 {
				want++
			}
		}
		if got := policy.CountChars(b); got != want {
			t.Fatalf("CountChars(%q) = %d, want %d", b, got, want)
		}
		if utf8.Valid(b) && want != utf8.RuneCount(b) {
			t.Fatalf("valid UTF-8 %q: %d characters, utf8 says %d", b, want, utf8.RuneCount(b))
		}
	})
}
