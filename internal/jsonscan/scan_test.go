package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestKinds pins what each failure reports and where: the callers word their errors from
// these (fastpath/extract's are the client's 400 messages).
func TestKinds(t *testing.T) {
	for _, c := range []struct {
		text string
		at   int
		k    Kind
	}{
		{`{"a":1}`, 7, OK},
		{` [1, {"b": [true, false, null, "s", -0.5e+3]}] `, 46, OK},
		{``, 0, ExpectedValue},
		{`x`, 0, ExpectedValue},
		{`[1,]`, 3, ExpectedValue},
		{`01`, 1, OK}, // SkipValue stops after the value; the caller checks what follows
		{`-`, 1, ExpectedDigit},
		{`-x`, 1, ExpectedDigit},
		{`1.`, 2, ExpectedDigit},
		{`1.e`, 2, ExpectedDigit},
		{`1e`, 2, ExpectedDigit},
		{`1e+`, 3, ExpectedDigit},
		{`tru`, 3, ExpectedLiteral},
		{`nul1`, 3, ExpectedLiteral},
		{`fals`, 4, ExpectedLiteral},
		{`"\u12"`, 5, ExpectedHex},
		{`"\u12`, 0, Unterminated}, // no closing quote: reported before the escape
		{`"\x"`, 2, ExpectedEscape},
		{`{1:2}`, 1, ExpectedNameOrBrace},
		{`{"a":1,}`, 7, ExpectedName},
		{`{"a" 1}`, 5, ExpectedColon},
		{`{"a":1]`, 6, ExpectedCommaOrBrace},
		{`[1}`, 2, ExpectedCommaOrBracket},
		{`[1 2]`, 3, ExpectedCommaOrBracket},
		{`[1`, 2, ExpectedCommaOrBracket},
		{` "abc`, 1, Unterminated},
		{`["a\`, 1, Unterminated},
		{`["0123456789abcdef0123`, 1, Unterminated},
		{"\"a\x01\"", 2, ControlChar},
		{"\"a\x1f\\x\"", 4, ExpectedEscape}, // escapes are checked before control characters
		{`{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, 5 + MaxDepth - 1, TooDeep},
	} {
		var st Stack
		at, k := SkipValue([]byte(c.text), 0, 0, &st)
		if at != c.at || k != c.k {
			t.Errorf("SkipValue(%.40q) = %d, %d; want %d, %d", c.text, at, k, c.at, c.k)
		}
	}
}

// TestDepthLimit: the same limit as encoding/json, counted from the depth given.
func TestDepthLimit(t *testing.T) {
	for _, depth := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		text := []byte(strings.Repeat(`{"a":[`, depth/2) + strings.Repeat("[", depth%2) + strings.Repeat("]", depth%2) + strings.Repeat(`]}`, depth/2))
		var st Stack
		at, k := SkipValue(text, 0, 0, &st)
		if ok := k == OK && at == len(text); ok != json.Valid(text) || ok != (depth <= MaxDepth) {
			t.Errorf("depth %d: %d, %d; json.Valid %v", depth, at, k, json.Valid(text))
		}
		// From inside a container at level 1, one level less fits.
		if _, k := SkipValue(text, 0, 1, &st); (k == OK) != (depth < MaxDepth) {
			t.Errorf("depth %d under level 1: %d", depth, k)
		}
	}
	deep := []byte(strings.Repeat("[", 1_000_000))
	var st Stack
	if at, k := SkipValue(deep, 0, 0, &st); k != TooDeep || at != MaxDepth {
		t.Errorf("a million levels: %d, %d", at, k)
	}
}

func TestNext(t *testing.T) {
	for _, c := range []struct {
		text   string
		closer byte
		at     int
		more   bool
		ok     bool
	}{
		{" , \t\"x\"", '}', 2, true, true},
		{"\n}", '}', 2, false, true},
		{"]", ']', 1, false, true},
		{"]", '}', 0, false, false},
		{"  ", ']', 2, false, false},
	} {
		at, more, ok := Next([]byte(c.text), 0, c.closer)
		if at != c.at || more != c.more || ok != c.ok {
			t.Errorf("Next(%q, %q) = %d, %v, %v; want %d, %v, %v", c.text, c.closer, at, more, ok, c.at, c.more, c.ok)
		}
	}
}
