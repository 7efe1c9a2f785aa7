package extract

// Extract reads the routing fields of body, posted to route, into f. It first resets f,
// then makes one pass that validates the whole body as a single JSON object and fills f
// as it goes. It allocates nothing once f's buffers have grown to the sizes the traffic
// needs.
//
// On error f holds partial results that must not be used. The error is a *SyntaxError
// (wrapping ErrInvalidJSON) when the body is not well-formed JSON, else a *FieldError
// (wrapping ErrFieldType) for the first routing field, by position, whose final value has
// the wrong type. Both messages are meant for the client's 400 response.
func Extract(body []byte, route Route, f *Fields) error {
	f.Reset()
	if route < RouteChat || route >= numRoutes {
		return ErrUnknownRoute
	}
	s := scanner{buf: body, f: f, list: "messages"}
	if route == RouteResponses {
		s.list = "input"
	}
	if err := s.object(route); err != nil {
		return err
	}
	if route == RouteMessages {
		s.joinSystem()
	}
	return nil
}

// The top-level members routing reads. A member's slot holds the type error of its last
// occurrence, so that a later duplicate that is well-typed wins, as with encoding/json.
const (
	keyOther = iota
	keyModel
	keyStream
	keyRid
	keyMessages
	keyPrompt
	keyText
	keyInputIDs
	keyQuery
	keyTokens
	keySystem
	keyInput
	numKeys
)

// topKey classifies a top-level member name. Names match exactly, after JSON decoding,
// like encoding/json decoding into a map (not its case-insensitive struct matching).
func (s *scanner) topKey(r rawString, route Route) int {
	switch string(s.name(r)) {
	case "model":
		return keyModel
	case "stream":
		return keyStream
	case "rid":
		return keyRid
	case "messages":
		if route == RouteChat || route == RouteMessages {
			return keyMessages
		}
	case "prompt":
		if route == RouteCompletions || route == RouteTokenize {
			return keyPrompt
		}
	case "input":
		switch route {
		case RouteEmbeddings, RouteClassify:
			return keyPrompt // the completions prompt's shapes, under another name
		case RouteResponses:
			return keyInput
		}
	case "query":
		if route == RouteRerank {
			return keyQuery
		}
	case "tokens":
		if route == RouteDetokenize {
			return keyTokens
		}
	case "system":
		if route == RouteMessages {
			return keySystem
		}
	case "text":
		if route == RouteGenerate {
			return keyText
		}
	case "input_ids":
		if route == RouteGenerate {
			return keyInputIDs
		}
	}
	return keyOther
}

// object walks the body: the one top-level object, then nothing but whitespace.
func (s *scanner) object(route Route) error {
	if s.peek() != '{' {
		return s.errExpected(s.pos, expObjectBody)
	}
	s.pos++
	var typeErrs [numKeys]*FieldError
	more := s.nonEmpty('}')
	for more {
		name, err := s.memberName(expNameOrBrace)
		if err != nil {
			return err
		}
		key := s.topKey(name, route)
		start := s.pos
		switch key {
		case keyModel:
			err = s.model()
		case keyStream:
			err = s.stream()
		case keyRid:
			err = s.rid()
		case keyMessages:
			err = s.messages()
		case keyPrompt:
			err = s.prompt(promptName(route))
		case keyQuery:
			err = s.query()
		case keyTokens:
			err = s.tokenIDsOrNull("tokens")
		case keySystem:
			err = s.system()
		case keyInput:
			err = s.responsesInput()
		case keyText:
			err = s.generateText()
		case keyInputIDs:
			err = s.tokenIDsOrNull("input_ids")
		default:
			err = s.skipValue(1)
		}
		if err = s.settle(&typeErrs[key], start, 1, err); err != nil {
			return err
		}
		if more, err = s.next('}'); err != nil {
			return err
		}
	}
	s.skipWS()
	if s.pos != len(s.buf) {
		return s.errExpected(s.pos, expEnd)
	}
	return firstTypeError(typeErrs[:])
}

// settle finishes a member whose value started at start. A syntax error ends the scan. A
// type error is kept in *slot, replacing that of any earlier duplicate, and the value is
// skipped again from its start so that the rest of the body is still validated: syntax
// errors anywhere take precedence, and a later duplicate may still clear it. Success
// clears *slot.
func (s *scanner) settle(slot **FieldError, start, depth int, err error) error {
	if err == nil {
		*slot = nil
		return nil
	}
	fe, ok := err.(*FieldError)
	if !ok {
		return err
	}
	s.pos = start
	if err := s.skipValue(depth); err != nil {
		return err
	}
	*slot = fe
	return nil
}

// firstTypeError returns the slot error that starts earliest in the body, or nil.
func firstTypeError(errs []*FieldError) error {
	var first *FieldError
	for _, e := range errs {
		if e != nil && (first == nil || e.Offset < first.Offset) {
			first = e
		}
	}
	if first == nil {
		return nil
	}
	return first
}

func (s *scanner) typeError(path, want string) error {
	return &FieldError{Path: path, Want: want, Offset: s.pos}
}

// model reads "model": a string, or null for absent.
func (s *scanner) model() error {
	f := s.f
	f.Model, f.HasModel = nil, false
	switch s.buf[s.pos] {
	case '"':
		r, err := s.scanString()
		if err != nil {
			return err
		}
		f.Model, f.HasModel = s.bytes(r, &f.modelBuf), true
		return nil
	case 'n':
		return s.scanLiteral("null")
	}
	return s.typeError("model", wantString)
}

// stream reads "stream": a boolean, or null for false.
func (s *scanner) stream() error {
	f := s.f
	f.Stream = false
	switch s.buf[s.pos] {
	case 't':
		f.Stream = true
		return s.scanLiteral("true")
	case 'f':
		return s.scanLiteral("false")
	case 'n':
		return s.scanLiteral("null")
	}
	return s.typeError("stream", wantBoolean)
}

// rid reads "rid": a string, or the first string of an array of strings (SGLang accepts
// one rid per prompt of a batch; the batch is routed as one request, by its first).
func (s *scanner) rid() error {
	f := s.f
	f.Rid = nil
	r, ok, err := s.stringOrFirst("rid")
	if ok {
		f.Rid = s.bytes(r, &f.ridBuf)
	}
	return err
}

// stringOrFirst reads a string, null, or an array of strings, returning the string or the
// array's first element; ok is false for null and the empty array.
func (s *scanner) stringOrFirst(path string) (first rawString, ok bool, err error) {
	switch s.buf[s.pos] {
	case '"':
		first, err = s.scanString()
		return first, err == nil, err
	case 'n':
		return first, false, s.scanLiteral("null")
	case '[':
	default:
		return first, false, s.typeError(path, wantStrings)
	}
	s.pos++
	more := s.nonEmpty(']')
	for more {
		if s.pos >= len(s.buf) || s.buf[s.pos] != '"' {
			return first, false, s.typeError(path, wantStrings)
		}
		r, err := s.scanString()
		if err != nil {
			return first, false, err
		}
		if !ok {
			first, ok = r, true
		}
		if more, err = s.next(']'); err != nil {
			return first, false, err
		}
	}
	return first, ok, nil
}

// promptName is the member that carries a prompt on route: "input" on embeddings and
// classify, "prompt" elsewhere.
func promptName(route Route) string {
	if route == RouteEmbeddings || route == RouteClassify {
		return "input"
	}
	return "prompt"
}

// query reads the rerank "query": a string, or null for absent.
func (s *scanner) query() error { return s.textOrNull("query", wantString) }

// textOrNull reads the string at pos as the routing text, or null for none; any other value
// is a type error of the field at path, which wants want.
func (s *scanner) textOrNull(path, want string) error {
	f := s.f
	f.Text, f.textBuf = nil, f.textBuf[:0]
	switch s.buf[s.pos] {
	case '"':
		return s.textString()
	case 'n':
		return s.scanLiteral("null")
	}
	return s.typeError(path, want)
}

// tokenIDsOrNull reads the member at path that carries token IDs into InputIDs: an array of
// token IDs, a batch of such arrays of which the first is kept, or null for none. It reads
// /generate "input_ids" and the detokenize "tokens".
func (s *scanner) tokenIDsOrNull(path string) error {
	s.f.InputIDs = s.f.InputIDs[:0]
	switch s.buf[s.pos] {
	case 'n':
		return s.scanLiteral("null")
	case '[':
		return s.tokenIDs(path, wantTokenIDArrays)
	}
	return s.typeError(path, wantTokenIDArrays)
}

// prompt reads a completions-style prompt (the member name): a string; an array of strings,
// joined with ' ' as the SGLang Model Gateway joins them; token IDs; or a batch of token-ID
// arrays, of which the first is kept.
func (s *scanner) prompt(name string) error {
	f := s.f
	f.Text, f.textBuf, f.InputIDs = nil, f.textBuf[:0], f.InputIDs[:0]
	switch s.buf[s.pos] {
	case '"':
		return s.textString()
	case 'n':
		return s.scanLiteral("null")
	case '[':
	default:
		return s.typeError(name, wantPrompt)
	}
	arrayStart := s.pos
	s.pos++
	switch c := s.peek(); {
	case c == ']':
		s.pos++
		return nil
	case c == '"':
		return s.joinStrings(name)
	case c >= '0' && c <= '9', c == '[':
		s.pos = arrayStart
		return s.tokenIDs(name, wantPrompt)
	}
	return s.typeError(name, wantPrompt)
}

// textString reads the string at pos into Text: a view into the body when it needs no
// decoding, else its value, decoded in the same pass into textBuf.
func (s *scanner) textString() error {
	f := s.f
	buf, r, err := s.appendString(f.textBuf[:0])
	f.textBuf = buf
	if err != nil {
		return err
	}
	if r.escaped {
		f.Text = f.textBuf
	} else {
		f.Text = s.buf[r.start:r.end:r.end]
	}
	return nil
}

// joinStrings reads the rest of an array of strings, pos at its first element, into Text.
func (s *scanner) joinStrings(name string) error {
	f := s.f
	for more := true; more; {
		if s.pos >= len(s.buf) || s.buf[s.pos] != '"' {
			return s.typeError(name, wantPrompt)
		}
		var err error
		if f.textBuf, _, err = s.appendString(f.textBuf); err != nil {
			return err
		}
		if more, err = s.next(']'); err != nil {
			return err
		}
		if more {
			f.textBuf = append(f.textBuf, ' ')
		}
	}
	f.Text = f.textBuf
	return nil
}

// generateText reads /generate "text": a string, or the first of an array of strings
// (SGLang's batch form; the batch is routed as one request, by its first prompt).
func (s *scanner) generateText() error {
	f := s.f
	f.Text, f.textBuf = nil, f.textBuf[:0]
	if s.buf[s.pos] == '"' {
		return s.textString()
	}
	r, ok, err := s.stringOrFirst("text")
	if ok {
		f.Text = s.bytes(r, &f.textBuf)
	}
	return err
}

// tokenIDs reads, pos at '[', an array of token IDs into InputIDs, or an array of such
// arrays of which the first goes to InputIDs (a batch is routed by its first sequence, as
// the SGLang Model Gateway does) and the others are only checked.
func (s *scanner) tokenIDs(path, want string) error {
	f := s.f
	s.pos++
	if s.peek() != '[' {
		return s.tokenRow(path, want)
	}
	for more, first := true, true; more; first = false {
		if s.pos >= len(s.buf) || s.buf[s.pos] != '[' {
			return s.typeError(path, want)
		}
		keep := len(f.InputIDs)
		s.pos++
		if err := s.tokenRow(path, want); err != nil {
			return err
		}
		if !first {
			f.InputIDs = f.InputIDs[:keep]
		}
		var err error
		if more, err = s.next(']'); err != nil {
			return err
		}
	}
	return nil
}

// tokenRow reads the elements of an array of token IDs, pos just past its '[', appending
// them to InputIDs. Digits are converted as they are scanned: /generate bodies can carry
// thousands of IDs.
func (s *scanner) tokenRow(path, want string) error {
	f := s.f
	b := s.buf
	more := s.nonEmpty(']')
	for more {
		i, start := s.pos, s.pos
		if i >= len(b) || b[i]-'0' > 9 {
			return s.typeError(path, want)
		}
		v := uint64(b[i] - '0')
		i++
		// After a leading 0 JSON allows no digit: next reports it as the syntax error it is.
		// Eleven digits at most: enough to tell that a value exceeds 32 bits.
		if lim := min(len(b), start+11); v != 0 {
			for ; i < lim; i++ {
				d := b[i] - '0'
				if d > 9 {
					break
				}
				v = v*10 + uint64(d)
			}
		}
		// A fraction, an exponent, an 11th digit or a value over 32 bits: a number, but not
		// a token ID. settle re-validates the whole value, so its syntax is checked there.
		if i < len(b) && (b[i] == '.' || b[i]|0x20 == 'e' || v != 0 && b[i]-'0' <= 9) || v > 1<<32-1 {
			return s.typeError(path, want)
		}
		f.InputIDs = append(f.InputIDs, uint32(v))
		// next, inlined for the common separators "," and ", ".
		s.pos = i
		s.skipWS()
		if s.pos < len(b) && b[s.pos] == ',' {
			s.pos++
			s.skipWS()
			continue
		}
		var err error
		if more, err = s.next(']'); err != nil {
			return err
		}
	}
	return nil
}
