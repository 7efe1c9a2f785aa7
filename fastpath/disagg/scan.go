package disagg

import "github.com/smg-go/smg/internal/jsonscan"

// MaxDepth is the deepest nesting of objects and arrays accepted, counting the body itself
// as level 1. It equals encoding/json's limit (and fastpath/extract's), so a body the
// extractor accepted is never rejected here for its depth.
const MaxDepth = jsonscan.MaxDepth

// scanner walks the top-level members of one JSON object once; internal/jsonscan, which
// fastpath/extract uses too, validates everything in them as strictly as encoding/json
// (except for UTF-8, passed through as sent). pos is the next unread byte. Every failure is
// ErrInvalidBody: the gateway validated the body before, so none is the client's to read.
type scanner struct {
	buf []byte
	pos int
	// kinds is the container stack for skipping a value of hostile depth without recursion
	// or allocation. 1.25 KiB, on the caller's stack.
	kinds jsonscan.Stack
}

// member is one top-level member: the name's content between its quotes, and the value.
type member struct {
	nameStart, nameEnd int
	escaped            bool // the name has a backslash escape
	valStart, valEnd   int
}

// begin checks the object's opening brace and reports whether a member follows.
func (s *scanner) begin() (more bool, err error) {
	c, i := jsonscan.Peek(s.buf, s.pos)
	if c != '{' {
		return false, ErrInvalidBody
	}
	c, i = jsonscan.Peek(s.buf, i+1)
	if c == '}' {
		s.pos = i + 1
		return false, nil
	}
	s.pos = i
	return true, nil
}

// member scans one top-level member and the ',' or '}' after it; more reports a ','.
func (s *scanner) member() (m member, more bool, err error) {
	// begin and the ',' case of Next leave pos at a non-space byte or the end.
	b := s.buf
	if s.pos >= len(b) || b[s.pos] != '"' {
		return m, false, ErrInvalidBody
	}
	m.nameStart = s.pos + 1
	i, escaped, k := jsonscan.String(b, s.pos)
	if k != jsonscan.OK {
		return m, false, ErrInvalidBody
	}
	m.nameEnd, m.escaped = i-1, escaped
	c, i := jsonscan.Peek(b, i)
	if c != ':' {
		return m, false, ErrInvalidBody
	}
	m.valStart = jsonscan.SkipWS(b, i+1)
	if m.valEnd, k = jsonscan.SkipValue(b, m.valStart, 1, &s.kinds); k != jsonscan.OK {
		return m, false, ErrInvalidBody
	}
	i, more, ok := jsonscan.Next(b, m.valEnd, '}')
	if !ok {
		return m, false, ErrInvalidBody
	}
	s.pos = jsonscan.SkipWS(b, i)
	return m, more, nil
}

// end checks that nothing but whitespace follows the object.
func (s *scanner) end() error {
	if jsonscan.SkipWS(s.buf, s.pos) != len(s.buf) {
		return ErrInvalidBody
	}
	return nil
}
