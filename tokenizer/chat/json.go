package chat

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// maxJSONDepth bounds nesting in DecodeJSON so hostile input cannot exhaust
// the stack.
const maxJSONDepth = 256

// DecodeJSON decodes one JSON value into a template value the way Python's
// json.loads does: objects become dicts that keep their keys in document
// order (a repeated key keeps its first position and its last value),
// numbers without a fraction or exponent become ints (floats when they do not
// fit in int64), null becomes none. Trailing non-space input is an error.
func DecodeJSON(data []byte) (jinja.Value, error) {
	d := decoder{data: data}
	d.skipSpace()
	v, err := d.value(0)
	if err != nil {
		return jinja.Undefined(), err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return jinja.Undefined(), d.errorf("unexpected %q after top-level value", d.data[d.pos])
	}
	return v, nil
}

type decoder struct {
	data []byte
	pos  int
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), d.errorf("nesting deeper than %d", maxJSONDepth)
	}
	if d.pos >= len(d.data) {
		return jinja.Undefined(), d.errorf("unexpected end of input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, err := d.str()
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"):
		return jinja.NewBool(true), nil
	case d.literal("false"):
		return jinja.NewBool(false), nil
	case d.literal("null"):
		return jinja.None(), nil
	default:
		return jinja.Undefined(), d.errorf("unexpected %q", c)
	}
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

func (d *decoder) object(depth int) (jinja.Value, error) {
	d.pos++ // '{'
	v := jinja.NewDict()
	dict := v.AsDict()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return v, nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return jinja.Undefined(), d.errorf("expected object key")
		}
		key, err := d.str()
		if err != nil {
			return jinja.Undefined(), err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return jinja.Undefined(), d.errorf("expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		item, err := d.value(depth + 1)
		if err != nil {
			return jinja.Undefined(), err
		}
		dict.Set(key, item)
		switch done, err := d.afterItem('}', "object"); {
		case err != nil:
			return jinja.Undefined(), err
		case done:
			return v, nil
		}
	}
}

func (d *decoder) array(depth int) (jinja.Value, error) {
	d.pos++ // '['
	var items []jinja.Value
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return jinja.NewList(items), nil
	}
	for {
		d.skipSpace()
		item, err := d.value(depth + 1)
		if err != nil {
			return jinja.Undefined(), err
		}
		items = append(items, item)
		switch done, err := d.afterItem(']', "array"); {
		case err != nil:
			return jinja.Undefined(), err
		case done:
			return jinja.NewList(items), nil
		}
	}
}

// afterItem reads what follows an item of an array or object: ',' before
// the next item, or the closing bracket (done).
func (d *decoder) afterItem(closing byte, container string) (done bool, err error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.errorf("unterminated %s", container)
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		return false, nil
	case closing:
		d.pos++
		return true, nil
	}
	return false, d.errorf("expected ',' or '%c' in %s", closing, container)
}

func (d *decoder) number() (jinja.Value, error) {
	start := d.pos
	isFloat := false
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	intStart := d.pos
	if n := digits(); n == 0 {
		return jinja.Undefined(), d.errorf("malformed number")
	} else if n > 1 && d.data[intStart] == '0' {
		return jinja.Undefined(), d.errorf("number with leading zero")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		isFloat = true
		d.pos++
		if digits() == 0 {
			return jinja.Undefined(), d.errorf("malformed number fraction")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		isFloat = true
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return jinja.Undefined(), d.errorf("malformed number exponent")
		}
	}
	text := string(d.data[start:d.pos])
	if !isFloat {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return jinja.NewInt(n), nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && f == 0 {
		return jinja.Undefined(), d.errorf("malformed number %q", text)
	}
	// Out-of-range values parse to ±Inf, as Python's float() does.
	return jinja.NewFloat(f), nil
}

// str decodes a JSON string starting at the opening quote. Invalid UTF-8 and
// unpaired surrogate escapes become U+FFFD.
func (d *decoder) str() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: the string up to its first escape is taken as it stands.
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return validString(d.data[start : d.pos-1]), nil
		case c == '\\':
			return d.escapedStr(append([]byte(nil), d.data[start:d.pos]...))
		case c < 0x20:
			return "", d.errorf("control character in string")
		}
		d.pos++
	}
	return "", d.errorf("unterminated string")
}

// escapedStr decodes the rest of a string from its first escape (at d.pos)
// on, appending to buf, which holds the text before it.
func (d *decoder) escapedStr(buf []byte) (string, error) {
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return validString(buf), nil
		case c < 0x20:
			return "", d.errorf("control character in string")
		case c == '\\':
			var err error
			if buf, err = d.escape(buf); err != nil {
				return "", err
			}
		default:
			buf = append(buf, c)
			d.pos++
		}
	}
	return "", d.errorf("unterminated string")
}

// escape appends what the escape at d.pos stands for to buf. A backslash
// that ends the input appends nothing: the caller reports the unterminated
// string.
func (d *decoder) escape(buf []byte) ([]byte, error) {
	d.pos++ // backslash
	if d.pos >= len(d.data) {
		return buf, nil
	}
	e := d.data[d.pos]
	d.pos++
	if b, ok := jsonEscapes.lookup(e); ok {
		return append(buf, b), nil
	}
	if e != 'u' {
		return buf, d.errorf("invalid escape \\%c", e)
	}
	r, err := d.unicodeEscape()
	return utf8.AppendRune(buf, r), err
}

// unicodeEscape decodes the four hex digits of a \u escape at d.pos, joined
// with a following \u escape when the two form a surrogate pair; a surrogate
// without its pair becomes U+FFFD (and the escape after it is read on its
// own).
func (d *decoder) unicodeEscape() (rune, error) {
	r, ok := d.hex4()
	if !ok {
		return 0, d.errorf("malformed \\u escape")
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if d.pos+1 >= len(d.data) || d.data[d.pos] != '\\' || d.data[d.pos+1] != 'u' {
		return utf8.RuneError, nil
	}
	save := d.pos
	d.pos += 2
	r2, ok := d.hex4()
	if !ok {
		return 0, d.errorf("malformed \\u escape")
	}
	if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
		return pair, nil
	}
	d.pos = save
	return utf8.RuneError, nil
}

// validString converts b to a string in which each byte that is not part of
// valid UTF-8 becomes U+FFFD.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b)))
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	d.pos += 4
	return r, true
}
