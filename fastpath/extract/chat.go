package extract

import (
	"slices"
	"strconv"
)

// Nesting levels of the chat structure, for MaxDepth accounting of skipped values.
const (
	depthMessage = 3 // body (1) > "messages" array (2) > message object (3)
	depthPart    = 5 // ... > "content" array (4) > content part object (5)
)

// messages reads the chat "messages" array into Text: every message's content in order,
// plus the reasoning_content of assistant messages, the non-empty pieces joined with one
// space. These are the rules of the SGLang Model Gateway's extract_text_for_routing, so
// both build the same prefix trees from the same traffic.
func (s *scanner) messages() error {
	f := s.f
	f.Text, f.textBuf = nil, f.textBuf[:0]
	switch s.buf[s.pos] {
	case 'n':
		return s.scanLiteral("null")
	case '[':
	default:
		return s.typeError("messages", wantArray)
	}
	return s.messageList()
}

// messageList reads, pos at '[', an array of message objects into Text (messages, and the
// Responses API's input items).
func (s *scanner) messageList() error {
	f := s.f
	s.pos++
	more := s.nonEmpty(']')
	for i := 0; more; i++ {
		if s.pos >= len(s.buf) || s.buf[s.pos] != '{' {
			return s.typeError(s.list+"["+strconv.Itoa(i)+"]", wantObject)
		}
		if err := s.message(i); err != nil {
			return err
		}
		var err error
		if more, err = s.next(']'); err != nil {
			return err
		}
	}
	f.Text = f.textBuf
	return nil
}

// appendPiece appends one non-empty piece of chat text, after a space if text precedes it.
func (s *scanner) appendPiece(r rawString) {
	if r.empty() {
		return
	}
	f := s.f
	if len(f.textBuf) > 0 {
		f.textBuf = append(f.textBuf, ' ')
	}
	f.textBuf = s.appendTo(f.textBuf, r)
}

// appendStringPiece is appendPiece for the string at pos, decoded as it is scanned.
func (s *scanner) appendStringPiece() error {
	f := s.f
	if s.pos+1 < len(s.buf) && s.buf[s.pos+1] == '"' {
		s.pos += 2 // empty: no piece, no separator
		return nil
	}
	if len(f.textBuf) > 0 {
		f.textBuf = append(f.textBuf, ' ')
	}
	var err error
	f.textBuf, _, err = s.appendString(f.textBuf)
	return err
}

// message reads one message object, pos at its '{'. Its content is appended as it is read;
// a later duplicate "content" first removes what an earlier one appended. Reasoning goes
// last, once the role is known, whatever the member order.
func (s *scanner) message(i int) error {
	f := s.f
	s.pos++
	var (
		textStart    = len(f.textBuf)
		contentErr   *FieldError
		assistant    bool
		reasoning    rawString
		hasReasoning bool
	)
	more := s.nonEmpty('}')
	for more {
		name, err := s.memberName(expNameOrBrace)
		if err != nil {
			return err
		}
		switch string(s.name(name)) {
		case "content":
			start := s.pos
			f.textBuf = f.textBuf[:textStart]
			if err := s.settle(&contentErr, start, depthMessage, s.content(i)); err != nil {
				return err
			}
		case "role":
			// Lenient: a role that is not a string is the worker's to reject.
			assistant = false
			if s.buf[s.pos] == '"' {
				r, err := s.scanString()
				if err != nil {
					return err
				}
				assistant = s.equals(r, "assistant")
			} else if err := s.skipValue(depthMessage); err != nil {
				return err
			}
		case "reasoning_content":
			// Lenient too: only a string contributes.
			hasReasoning = false
			if s.buf[s.pos] == '"' {
				if reasoning, err = s.scanString(); err != nil {
					return err
				}
				hasReasoning = true
			} else if err := s.skipValue(depthMessage); err != nil {
				return err
			}
		default:
			if err := s.skipValue(depthMessage); err != nil {
				return err
			}
		}
		if more, err = s.next('}'); err != nil {
			return err
		}
	}
	if contentErr != nil {
		return contentErr
	}
	if assistant && hasReasoning {
		s.appendPiece(reasoning)
	}
	return nil
}

// content reads the "content" of item i (i < 0: the Anthropic "system"): a string, null, or an
// array of content parts whose "text" parts contribute their text.
func (s *scanner) content(i int) error {
	switch s.buf[s.pos] {
	case '"':
		return s.appendStringPiece()
	case 'n':
		return s.scanLiteral("null")
	case '[':
	default:
		return s.typeError(s.contentPath(i), wantContent)
	}
	s.pos++
	more := s.nonEmpty(']')
	for j := 0; more; j++ {
		if s.pos >= len(s.buf) || s.buf[s.pos] != '{' {
			return s.typeError(s.contentPath(i)+"["+strconv.Itoa(j)+"]", wantObject)
		}
		if err := s.part(i, j); err != nil {
			return err
		}
		var err error
		if more, err = s.next(']'); err != nil {
			return err
		}
	}
	return nil
}

// textPart reports whether a content part's type carries routing text: "text" on every
// route; on the Responses API also "input_text" and "output_text".
func (s *scanner) textPart(r rawString) bool {
	return s.equals(r, "text") || s.list == "input" && (s.equals(r, "input_text") || s.equals(r, "output_text"))
}

// contentPath names the content of item i (i < 0: the Anthropic "system"); only error
// messages build it.
func (s *scanner) contentPath(i int) string {
	if i < 0 {
		return "system"
	}
	return s.list + "[" + strconv.Itoa(i) + "].content"
}

// partPath names the "text" of content part j of item i (i < 0: block j of the Anthropic
// "system" array).
func (s *scanner) partPath(i, j int) string {
	if i < 0 {
		return "system[" + strconv.Itoa(j) + "].text"
	}
	return s.list + "[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "].text"
}

// system reads the Anthropic Messages "system": a string, null, or an array of content
// blocks whose "text" blocks contribute, into sysBuf (joined to the messages' text when
// the body is done, system first).
func (s *scanner) system() error {
	f := s.f
	main := f.textBuf
	f.textBuf = f.sysBuf[:0]
	err := s.content(-1)
	f.sysBuf, f.textBuf = f.textBuf, main
	return err
}

// responsesInput reads the Responses API's "input": a string, null, or an array of input
// items read like chat messages (their "content", a string or parts of type "input_text",
// "output_text" or "text").
func (s *scanner) responsesInput() error {
	if s.buf[s.pos] != '[' {
		return s.textOrNull("input", wantInput)
	}
	f := s.f
	f.Text, f.textBuf = nil, f.textBuf[:0]
	return s.messageList()
}

// joinSystem puts the Anthropic system text before the messages' text, one space between.
func (s *scanner) joinSystem() {
	f := s.f
	switch {
	case len(f.sysBuf) == 0:
	case len(f.Text) == 0:
		f.Text = f.sysBuf
	default:
		// f.Text is f.textBuf (messages builds it there): append the system text and rotate
		// it to the front in place, so that nothing is allocated.
		n := len(f.textBuf)
		f.textBuf = append(append(f.textBuf, f.sysBuf...), ' ')
		slices.Reverse(f.textBuf[:n])
		slices.Reverse(f.textBuf[n:])
		slices.Reverse(f.textBuf)
		f.Text = f.textBuf
	}
}

// part reads one content part, pos at its '{'. A part is a text part when its "type" is
// "text"; its "text" must then be a string. Other parts (images, audio, ...) route nothing.
func (s *scanner) part(i, j int) error {
	s.pos++
	var (
		isText  bool
		text    rawString
		hasText bool // the last "text" member is a string
		textAt  = -1 // where the last "text" member's value starts
	)
	more := s.nonEmpty('}')
	for more {
		name, err := s.memberName(expNameOrBrace)
		if err != nil {
			return err
		}
		nm := s.name(name)
		isType, isTextKey := string(nm) == "type", string(nm) == "text"
		switch {
		case isType && s.buf[s.pos] == '"':
			r, err := s.scanString()
			if err != nil {
				return err
			}
			isText = s.textPart(r)
		case isTextKey && s.buf[s.pos] == '"':
			textAt = s.pos
			if text, err = s.scanString(); err != nil {
				return err
			}
			hasText = true
		default:
			if isType {
				isText = false
			} else if isTextKey {
				textAt, hasText = s.pos, false
			}
			if err := s.skipValue(depthPart); err != nil {
				return err
			}
		}
		if more, err = s.next('}'); err != nil {
			return err
		}
	}
	if !isText {
		return nil
	}
	if !hasText {
		at := textAt
		if at < 0 {
			at = s.pos - 1 // no "text" member: point at the part's closing brace
		}
		return &FieldError{
			Path:   s.partPath(i, j),
			Want:   wantString,
			Offset: at,
		}
	}
	s.appendPiece(text)
	return nil
}
