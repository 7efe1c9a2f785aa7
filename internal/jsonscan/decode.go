package jsonscan

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped appends the decoded value of raw, the content of a string that String
// validated: bytes.IndexByte finds the escapes, and the runs between them are copied.
func AppendUnescaped(dst, raw []byte) []byte {
	for {
		e := bytes.IndexByte(raw, '\\')
		if e < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:e]...)
		var n int
		dst, n = appendEscape(dst, raw[e:])
		raw = raw[e+n:]
	}
}

// EqualUnescaped reports whether raw, the content of a string that String validated,
// decodes to s, without decoding it into a buffer.
func EqualUnescaped(raw []byte, s string) bool {
	j := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if j >= len(s) || s[j] != c {
				return false
			}
			i++
			j++
			continue
		}
		r, n := decodeEscape(raw[i:])
		i += n
		if r < utf8.RuneSelf {
			if j >= len(s) || s[j] != byte(r) {
				return false
			}
			j++
			continue
		}
		var enc [utf8.UTFMax]byte
		k := utf8.EncodeRune(enc[:], r)
		if len(s)-j < k || s[j:j+k] != string(enc[:k]) {
			return false
		}
		j += k
	}
	return j == len(s)
}

// appendEscape appends the value of the escape sequence at the start of raw and returns
// how many bytes it took.
func appendEscape(dst, raw []byte) ([]byte, int) {
	if c := raw[1]; c != 'u' {
		return append(dst, unescaped[c]), 2
	}
	r, n := decodeEscape(raw)
	return utf8.AppendRune(dst, r), n
}

// decodeEscape decodes the validated escape sequence at the start of raw and returns its
// rune and how many bytes it took. Like encoding/json, a \u escape of a high surrogate
// followed by one of a low surrogate is one rune; any other escaped surrogate is U+FFFD,
// and what follows it is decoded on its own.
func decodeEscape(raw []byte) (rune, int) {
	if c := raw[1]; c != 'u' {
		return rune(unescaped[c]), 2
	}
	r := hex4(raw[2:])
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	r2 := rune(-1)
	if len(raw) >= 12 && raw[6] == '\\' && raw[7] == 'u' {
		r2 = hex4(raw[8:])
	}
	if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
		return pair, 12
	}
	return utf8.RuneError, 6
}

// unescaped maps the character after a backslash to the byte it stands for; zero marks
// 'u' and the characters that are no escape at all.
var unescaped = [256]byte{
	'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

// hex4 reads four hex digits, or returns -1 if b does not start with them.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		v := unhex(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | rune(v)
	}
	return r
}
