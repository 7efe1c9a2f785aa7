package extract

import "github.com/smg-go/smg/internal/jsonscan"

// rawString is a scanned JSON string: buf[start:end] is its content between the quotes.
// Content without escapes is its own value and can be used in place.
type rawString struct {
	start, end int
	escaped    bool // has a backslash escape, so its value must be decoded
}

func (r rawString) empty() bool { return r.start == r.end }

// scanString validates the string whose opening quote is at pos and moves pos past its
// closing quote. Escapes are validated here so that decoding cannot fail later.
func (s *scanner) scanString() (rawString, error) {
	i, escaped, k := jsonscan.String(s.buf, s.pos)
	if k != jsonscan.OK {
		return rawString{}, s.syntaxError(i, k)
	}
	r := rawString{start: s.pos + 1, end: i - 1, escaped: escaped}
	s.pos = i
	return r, nil
}

// appendString is scanString for a string whose value is wanted in a buffer of ours, such
// as the chat text: it appends the decoded value to dst in the same pass.
func (s *scanner) appendString(dst []byte) ([]byte, rawString, error) {
	dst, i, escaped, k := jsonscan.AppendString(dst, s.buf, s.pos)
	if k != jsonscan.OK {
		return dst, rawString{}, s.syntaxError(i, k)
	}
	r := rawString{start: s.pos + 1, end: i - 1, escaped: escaped}
	s.pos = i
	return dst, r, nil
}
