package extract

import (
	"strconv"

	"github.com/smg-go/smg/internal/jsonscan"
)

// MaxDepth is the deepest nesting of objects and arrays Extract accepts, counting the body
// itself as level 1. It equals encoding/json's limit, so both reject the same bodies, and
// it bounds the work per byte: no recursion, the container stack is a bitset in Fields.
const MaxDepth = jsonscan.MaxDepth

// scanner walks one body once. pos is the index of the next unread byte. The JSON grammar
// itself is internal/jsonscan's, shared with fastpath/disagg; the methods here adapt it to
// the scanner's position and word its failures for the client (syntaxError).
type scanner struct {
	buf []byte
	pos int
	f   *Fields
	// list names the array of messages in error paths: "messages", or "input" on the
	// Responses API, whose input items are read like messages.
	list string
}

// errExpected builds the SyntaxError for "expected X at i".
func (s *scanner) errExpected(i int, what string) error {
	e := &SyntaxError{Offset: i, Expected: what}
	if i < len(s.buf) {
		e.found = s.buf[i]
	} else {
		e.Offset, e.atEOF = len(s.buf), true
	}
	return e
}

func (s *scanner) errMsg(i int, msg string) error {
	return &SyntaxError{Offset: i, Msg: msg}
}

// expected words each jsonscan.Kind that names what was expected.
var expected = [...]string{
	jsonscan.ExpectedValue:          expValue,
	jsonscan.ExpectedDigit:          expDigit,
	jsonscan.ExpectedLiteral:        expLiteral,
	jsonscan.ExpectedHex:            expHex,
	jsonscan.ExpectedEscape:         expEscape,
	jsonscan.ExpectedNameOrBrace:    expNameOrBrace,
	jsonscan.ExpectedName:           expName,
	jsonscan.ExpectedColon:          expColon,
	jsonscan.ExpectedCommaOrBrace:   expCommaOrBrace,
	jsonscan.ExpectedCommaOrBracket: expCommaOrBracket,
}

// syntaxError words the jsonscan failure k at position at for the client.
func (s *scanner) syntaxError(at int, k jsonscan.Kind) error {
	switch k {
	case jsonscan.Unterminated:
		return s.errMsg(len(s.buf), "unterminated string starting at byte "+strconv.Itoa(at))
	case jsonscan.ControlChar:
		c := s.buf[at]
		h := string([]byte{hexDigits[c>>4], hexDigits[c&15]})
		return s.errMsg(at, "control character 0x"+h+" inside a string (escape it, for example as \\n or \\u00"+h+")")
	case jsonscan.TooDeep:
		return s.errMsg(at, "nesting deeper than "+strconv.Itoa(MaxDepth)+" levels")
	}
	return s.errExpected(at, expected[k])
}

// skipWS advances past JSON whitespace.
func (s *scanner) skipWS() {
	s.pos = jsonscan.SkipWS(s.buf, s.pos)
}

// peek returns the byte at pos after whitespace, or 0 at the end of the body (0 starts
// no JSON token, so callers treat it like any other unexpected byte).
func (s *scanner) peek() byte {
	c, i := jsonscan.Peek(s.buf, s.pos)
	s.pos = i
	return c
}

// scanLiteral checks that lit ("true", "false" or "null") is at pos and moves past it.
func (s *scanner) scanLiteral(lit string) error {
	i, k := jsonscan.Literal(s.buf, s.pos, lit)
	if k != jsonscan.OK {
		return s.syntaxError(i, k)
	}
	s.pos = i
	return nil
}

// memberName scans `"name" :` at pos, with the whitespace around the colon, and leaves pos
// at the value, which callers may then index: the body does not end there. what is the
// expectation to report when pos is not at a quote.
func (s *scanner) memberName(what string) (rawString, error) {
	if s.pos >= len(s.buf) || s.buf[s.pos] != '"' {
		return rawString{}, s.errExpected(s.pos, what)
	}
	name, err := s.scanString()
	if err != nil {
		return name, err
	}
	if s.peek() != ':' {
		return name, s.errExpected(s.pos, expColon)
	}
	s.pos++
	s.skipWS()
	if s.pos >= len(s.buf) {
		return name, s.errExpected(s.pos, expValue)
	}
	return name, nil
}

// skipValue validates the value at pos (after optional whitespace) and moves pos past it,
// without extracting anything. depth is the nesting level of the container holding the
// value, so that MaxDepth counts from the body. The container stack is the Fields' own:
// keeping it there rather than on the goroutine stack saves zeroing 1.25 KB per call.
func (s *scanner) skipValue(depth int) error {
	i, k := jsonscan.SkipValue(s.buf, s.pos, depth, &s.f.kinds)
	if k != jsonscan.OK {
		return s.syntaxError(i, k)
	}
	s.pos = i
	return nil
}

// nonEmpty reports whether a member or element follows, after whitespace, in the object or
// array whose opening byte pos is past; an empty one (closer next) it consumes whole.
func (s *scanner) nonEmpty(closer byte) bool {
	if s.peek() == closer {
		s.pos++
		return false
	}
	return true
}

// next consumes the ',' between members or elements, or the closer, after a value.
// It reports whether another member or element follows.
func (s *scanner) next(closer byte) (more bool, err error) {
	i, more, ok := jsonscan.Next(s.buf, s.pos, closer)
	if !ok {
		if closer == '}' {
			return false, s.errExpected(i, expCommaOrBrace)
		}
		return false, s.errExpected(i, expCommaOrBracket)
	}
	if more {
		i = jsonscan.SkipWS(s.buf, i)
	}
	s.pos = i
	return more, nil
}
