package extract

import "strconv"

// MaxDepth is the deepest nesting of objects and arrays Extract accepts, counting the body
// itself as level 1. It equals encoding/json's limit, so both reject the same bodies, and
// it bounds the work per byte: no recursion, the container stack is a bitset in Fields.
const MaxDepth = 10000

// scanner walks one body once. pos is the index of the next unread byte.
type scanner struct {
	buf []byte
	pos int
	f   *Fields
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

// skipWS advances past JSON whitespace (RFC 8259 §2: space, tab, line feed, carriage
// return).
func (s *scanner) skipWS() {
	b := s.buf
	i := s.pos
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	s.pos = i
}

// peek returns the byte at pos after whitespace, or 0 at the end of the body (0 starts
// no JSON token, so callers treat it like any other unexpected byte).
func (s *scanner) peek() byte {
	s.skipWS()
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// scanNumber validates the number at pos (RFC 8259 §6 grammar) and moves pos past it.
// plain reports a non-negative integer without fraction or exponent, the only form a
// token ID may take.
func (s *scanner) scanNumber() (plain bool, err error) {
	b := s.buf
	i := s.pos
	plain = true
	if b[i] == '-' {
		plain = false
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		return false, s.errExpected(i, expDigit)
	}
	if i < len(b) && b[i] == '.' {
		plain = false
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false, s.errExpected(i, expDigit)
		}
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		plain = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false, s.errExpected(i, expDigit)
		}
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	s.pos = i
	return plain, nil
}

// scanLiteral checks that lit ("true", "false" or "null") is at pos and moves past it.
func (s *scanner) scanLiteral(lit string) error {
	b := s.buf
	for k := 0; k < len(lit); k++ {
		if i := s.pos + k; i >= len(b) || b[i] != lit[k] {
			return s.errExpected(i, expLiteral)
		}
	}
	s.pos += len(lit)
	return nil
}

// scanScalar validates the string, number or literal at pos. Callers have skipped
// whitespace.
func (s *scanner) scanScalar() error {
	if s.pos >= len(s.buf) {
		return s.errExpected(s.pos, expValue)
	}
	switch c := s.buf[s.pos]; c {
	case '"':
		_, err := s.scanString()
		return err
	case 't':
		return s.scanLiteral("true")
	case 'f':
		return s.scanLiteral("false")
	case 'n':
		return s.scanLiteral("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			_, err := s.scanNumber()
			return err
		}
		return s.errExpected(s.pos, expValue)
	}
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
// value, so that MaxDepth counts from the body. Containers are walked iteratively with
// their kinds kept in a bitset: hostile nesting costs neither recursion nor allocation.
func (s *scanner) skipValue(depth int) error {
	s.skipWS()
	if s.pos >= len(s.buf) || (s.buf[s.pos] != '{' && s.buf[s.pos] != '[') {
		return s.scanScalar()
	}
	b := s.buf
	base := depth
	for {
		// pos is at the start of a value, whitespace skipped.
		if s.pos < len(b) && (b[s.pos] == '{' || b[s.pos] == '[') {
			obj := b[s.pos] == '{'
			depth++
			if depth > MaxDepth {
				return s.errMsg(s.pos, "nesting deeper than "+strconv.Itoa(MaxDepth)+" levels")
			}
			s.setKind(depth, obj)
			s.pos++
			c := s.peek()
			switch {
			case obj && c == '}', !obj && c == ']':
				s.pos++
				depth--
			case obj:
				if _, err := s.memberName(expNameOrBrace); err != nil {
					return err
				}
				continue
			default:
				continue
			}
		} else if err := s.scanScalar(); err != nil {
			return err
		}
		// A value has ended: close containers until one continues with ','.
		for {
			if depth == base {
				return nil
			}
			obj := s.isObject(depth)
			c := s.peek()
			if c == ',' {
				s.pos++
				s.skipWS()
				if obj {
					if _, err := s.memberName(expName); err != nil {
						return err
					}
				}
				break
			}
			if obj && c == '}' || !obj && c == ']' {
				s.pos++
				depth--
				continue
			}
			if obj {
				return s.errExpected(s.pos, expCommaOrBrace)
			}
			return s.errExpected(s.pos, expCommaOrBracket)
		}
	}
}

func (s *scanner) setKind(depth int, obj bool) {
	w, bit := depth>>6, uint64(1)<<(depth&63)
	if obj {
		s.f.kinds[w] |= bit
	} else {
		s.f.kinds[w] &^= bit
	}
}

func (s *scanner) isObject(depth int) bool {
	return s.f.kinds[depth>>6]&(uint64(1)<<(depth&63)) != 0
}

// next consumes the ',' between members or elements, or the closer, after a value.
// It reports whether another member or element follows.
func (s *scanner) next(closer byte) (more bool, err error) {
	switch s.peek() {
	case ',':
		s.pos++
		s.skipWS()
		return true, nil
	case closer:
		s.pos++
		return false, nil
	}
	if closer == '}' {
		return false, s.errExpected(s.pos, expCommaOrBrace)
	}
	return false, s.errExpected(s.pos, expCommaOrBracket)
}
