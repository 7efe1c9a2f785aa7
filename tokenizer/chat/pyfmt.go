package chat

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// appendPyStr appends Python's str(v), which is what jinja2 prints for
// {{ v }}: strings as they are, True/False, None, floats in repr form, lists
// and dicts in repr form. Undefined prints as nothing.
func appendPyStr(b []byte, v jinja.Value) []byte {
	switch {
	case v.IsUndefined():
		return b
	case v.IsString():
		return append(b, v.AsString()...)
	default:
		return appendPyRepr(b, v)
	}
}

// appendPyRepr appends Python's repr(v).
func appendPyRepr(b []byte, v jinja.Value) []byte {
	switch {
	case v.IsUndefined():
		return b
	case v.IsNone():
		return append(b, "None"...)
	case v.IsBool():
		if v.AsBool() {
			return append(b, "True"...)
		}
		return append(b, "False"...)
	case v.IsInt():
		return strconv.AppendInt(b, v.AsInt(), 10)
	case v.IsFloat():
		return appendPyFloat(b, v.AsFloat(), false)
	case v.IsString():
		return appendPyQuoted(b, v.AsString())
	case v.IsList():
		b = append(b, '[')
		for i, item := range v.AsList().Items {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPyRepr(b, item)
		}
		return append(b, ']')
	case v.IsDict():
		d := v.AsDict()
		b = append(b, '{')
		for i, k := range d.Keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPyQuoted(b, k)
			b = append(b, ": "...)
			b = appendPyRepr(b, d.Data[k])
		}
		return append(b, '}')
	case v.IsCallable():
		return fmt.Appendf(b, "<function %s>", v.AsCallable().Name)
	}
	return b
}

// appendPyQuoted appends Python's repr of a str: single quotes unless the
// text holds a single quote and no double quote, backslash escapes for the
// quote, backslash, \t \n \r and non-printable characters.
func appendPyQuoted(b []byte, s string) []byte {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b = append(b, quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20 || r == 0x7f:
			b = fmt.Appendf(b, `\x%02x`, r)
		case r < 0x80 || unicode.IsPrint(r):
			b = utf8.AppendRune(b, r)
		case r <= 0xff:
			b = fmt.Appendf(b, `\x%02x`, r)
		case r <= 0xffff:
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = fmt.Appendf(b, `\U%08x`, r)
		}
	}
	return append(b, quote)
}

// appendPyFloat appends Python's repr of a float (the shortest text that
// round-trips, positional between 1e-4 and 1e16 with at least one fractional
// digit, else d.ddde±XX). With json set, non-finite values print the way
// json.dumps prints them (NaN, Infinity).
func appendPyFloat(b []byte, f float64, json bool) []byte {
	switch {
	case math.IsNaN(f):
		if json {
			return append(b, "NaN"...)
		}
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		if json {
			return append(b, "Infinity"...)
		}
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		if json {
			return append(b, "-Infinity"...)
		}
		return append(b, "-inf"...)
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	ei := slices.Index(e, 'e')
	mant, expText := e[:ei], e[ei+1:]
	exp, _ := strconv.Atoi(string(expText))
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if neg {
		b = append(b, '-')
	}
	if exp < -4 || exp >= 16 {
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if exp < 0 {
			b = append(b, '-')
			exp = -exp
		} else {
			b = append(b, '+')
		}
		if exp < 10 {
			b = append(b, '0')
		}
		return strconv.AppendInt(b, int64(exp), 10)
	}
	if exp < 0 {
		b = append(b, "0."...)
		for i := -1; i > exp; i-- {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	// exp >= 0: digits[0:exp+1] before the point.
	intLen := exp + 1
	if len(digits) <= intLen {
		b = append(b, digits...)
		for i := len(digits); i < intLen; i++ {
			b = append(b, '0')
		}
		return append(b, ".0"...)
	}
	b = append(b, digits[:intLen]...)
	b = append(b, '.')
	return append(b, digits[intLen:]...)
}

// jsonOptions are json.dumps' keyword arguments that transformers' tojson
// filter exposes.
type jsonOptions struct {
	ensureASCII bool
	indent      string // newline+indent per level when hasIndent
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// errNotJSON reports a value json.dumps cannot serialise (undefined,
// callables), as Python raises TypeError for them.
type errNotJSON struct{ what string }

func (e errNotJSON) Error() string { return "Object of type " + e.what + " is not JSON serializable" }

// appendJSON appends json.dumps(v, ...) for the given options.
func appendJSON(b []byte, v jinja.Value, o *jsonOptions, level int) ([]byte, error) {
	switch {
	case v.IsUndefined():
		return b, errNotJSON{"Undefined"}
	case v.IsCallable():
		return b, errNotJSON{"function"}
	case v.IsNone():
		return append(b, "null"...), nil
	case v.IsBool():
		if v.AsBool() {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case v.IsInt():
		return strconv.AppendInt(b, v.AsInt(), 10), nil
	case v.IsFloat():
		return appendPyFloat(b, v.AsFloat(), true), nil
	case v.IsString():
		return appendJSONString(b, v.AsString(), o.ensureASCII), nil
	case v.IsList():
		items := v.AsList().Items
		return o.appendItems(b, '[', ']', len(items), level, func(b []byte, i int) ([]byte, error) {
			return appendJSON(b, items[i], o, level+1)
		})
	case v.IsDict():
		d := v.AsDict()
		keys := d.Keys
		if o.sortKeys {
			keys = slices.Clone(keys)
			slices.Sort(keys)
		}
		return o.appendItems(b, '{', '}', len(keys), level, func(b []byte, i int) ([]byte, error) {
			b = appendJSONString(b, keys[i], o.ensureASCII)
			b = append(b, o.keySep...)
			return appendJSON(b, d.Data[keys[i]], o, level+1)
		})
	}
	return b, errNotJSON{"unknown"}
}

// appendItems appends a JSON array or object of n items between open and
// close, separated and indented as json.dumps does; item appends the i-th.
func (o *jsonOptions) appendItems(b []byte, open, close byte, n, level int, item func(b []byte, i int) ([]byte, error)) ([]byte, error) {
	if n == 0 {
		return append(b, open, close), nil
	}
	b = append(b, open)
	var err error
	for i := range n {
		if i > 0 {
			b = append(b, o.itemSep...)
		}
		b = o.newline(b, level+1)
		if b, err = item(b, i); err != nil {
			return b, err
		}
	}
	b = o.newline(b, level)
	return append(b, close), nil
}

func (o *jsonOptions) newline(b []byte, level int) []byte {
	if !o.hasIndent {
		return b
	}
	b = append(b, '\n')
	for range level {
		b = append(b, o.indent...)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends a string the way Python's json encoder writes it:
// \" \\ \n \r \t \b \f, other control characters as \u00XX, and with
// ensureASCII every non-ASCII character as \uXXXX (surrogate pairs above the
// BMP). Nothing else is escaped ('<', '>', '&', U+2028 stay as they are).
func appendJSONString(b []byte, s string, ensureASCII bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || !ensureASCII) {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				r1, r2 := utf16.EncodeRune(r)
				b = appendU4(b, r1)
				b = appendU4(b, r2)
			} else {
				b = appendU4(b, r)
			}
			i += size
			start = i
			continue
		}
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		default:
			b = appendU4(b, rune(c))
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendU4(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
