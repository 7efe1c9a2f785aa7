package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// want is what Extract should produce, as plain values for comparison.
type want struct {
	Model    string
	HasModel bool
	Stream   bool
	Rid      string
	Text     string
	InputIDs []uint32
}

func got(f *Fields) want {
	return want{
		Model:    string(f.Model),
		HasModel: f.HasModel,
		Stream:   f.Stream,
		Rid:      string(f.Rid),
		Text:     string(f.Text),
		InputIDs: slices.Clone(f.InputIDs),
	}
}

// canonical returns w with each byte of invalid UTF-8 replaced by U+FFFD, as
// encoding/json decodes it: Extract passes such bytes through (see the package
// documentation), so this is the form that must equal the reference's.
func (w want) canonical() want {
	w.Model, w.Rid, w.Text = canonicalUTF8(w.Model), canonicalUTF8(w.Rid), canonicalUTF8(w.Text)
	return w
}

func canonicalUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func (w want) equal(o want) bool {
	return w.Model == o.Model && w.HasModel == o.HasModel && w.Stream == o.Stream &&
		w.Rid == o.Rid && w.Text == o.Text && slices.Equal(w.InputIDs, o.InputIDs)
}

var errRef = errors.New("reference: rejected")

// reference is the slow, obviously correct model of Extract: encoding/json decodes the
// body into generic values (maps, so duplicate names resolve last-wins; UseNumber, so no
// float range errors), then the routing rules of the package documentation are applied
// to the decoded tree. It only reports accept or reject: the differential tests compare
// that and the extracted values, not error messages.
func reference(body []byte, route Route) (want, error) {
	var w want
	if !json.Valid(body) {
		return w, errRef
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return w, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return w, errRef
	}
	switch x := m["model"].(type) {
	case nil:
	case string:
		w.Model, w.HasModel = x, true
	default:
		return w, errRef
	}
	switch x := m["stream"].(type) {
	case nil:
	case bool:
		w.Stream = x
	default:
		return w, errRef
	}
	var err error
	if w.Rid, err = refStringOrFirst(m["rid"]); err != nil {
		return w, err
	}
	switch route {
	case RouteChat:
		w.Text, err = refChat(m["messages"], "text")
	case RouteCompletions:
		w.Text, w.InputIDs, err = refPrompt(m["prompt"])
	case RouteGenerate:
		if w.Text, err = refStringOrFirst(m["text"]); err == nil {
			w.InputIDs, err = refTokenIDs(m["input_ids"])
		}
	case RouteEmbeddings, RouteClassify:
		w.Text, w.InputIDs, err = refPrompt(m["input"])
	case RouteTokenize:
		w.Text, w.InputIDs, err = refPrompt(m["prompt"])
	case RouteRerank:
		switch x := m["query"].(type) {
		case nil:
		case string:
			w.Text = x
		default:
			err = errRef
		}
	case RouteDetokenize:
		w.InputIDs, err = refTokenIDs(m["tokens"])
	case RouteResponses:
		switch x := m["input"].(type) {
		case nil:
		case string:
			w.Text = x
		case []any:
			w.Text, err = refChat(x, "text", "input_text", "output_text")
		default:
			err = errRef
		}
	case RouteMessages:
		var sys, msgs string
		if sys, err = refSystem(m["system"]); err == nil {
			msgs, err = refChat(m["messages"], "text")
		}
		w.Text = strings.Join(slices.DeleteFunc([]string{sys, msgs}, func(s string) bool { return s == "" }), " ")
	}
	return w, err
}

// refSystem is the Anthropic "system": a string, or text blocks joined with one space.
func refSystem(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []any:
		var pieces []string
		for _, bv := range x {
			block, ok := bv.(map[string]any)
			if !ok {
				return "", errRef
			}
			if t, _ := block["type"].(string); t != "text" {
				continue
			}
			text, ok := block["text"].(string)
			if !ok {
				return "", errRef
			}
			pieces = append(pieces, text)
		}
		pieces = slices.DeleteFunc(pieces, func(s string) bool { return s == "" })
		return strings.Join(pieces, " "), nil
	}
	return "", errRef
}

func refStringOrFirst(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []any:
		first := ""
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return "", errRef
			}
			if i == 0 {
				first = s
			}
		}
		return first, nil
	}
	return "", errRef
}

// refChat is the chat rule over messages (or Responses input items); parts whose type is one
// of textTypes contribute their text.
func refChat(v any, textTypes ...string) (string, error) {
	if v == nil {
		return "", nil
	}
	msgs, ok := v.([]any)
	if !ok {
		return "", errRef
	}
	var pieces []string
	for _, mv := range msgs {
		msg, ok := mv.(map[string]any)
		if !ok {
			return "", errRef
		}
		switch c := msg["content"].(type) {
		case nil:
		case string:
			pieces = append(pieces, c)
		case []any:
			for _, pv := range c {
				part, ok := pv.(map[string]any)
				if !ok {
					return "", errRef
				}
				if t, _ := part["type"].(string); !slices.Contains(textTypes, t) {
					continue
				}
				text, ok := part["text"].(string)
				if !ok {
					return "", errRef
				}
				pieces = append(pieces, text)
			}
		default:
			return "", errRef
		}
		if role, _ := msg["role"].(string); role == "assistant" {
			if r, ok := msg["reasoning_content"].(string); ok {
				pieces = append(pieces, r)
			}
		}
	}
	pieces = slices.DeleteFunc(pieces, func(s string) bool { return s == "" })
	return strings.Join(pieces, " "), nil
}

func refPrompt(v any) (string, []uint32, error) {
	switch x := v.(type) {
	case nil:
		return "", nil, nil
	case string:
		return x, nil, nil
	case []any:
		if len(x) == 0 {
			return "", nil, nil
		}
		if _, ok := x[0].(string); ok {
			strs := make([]string, len(x))
			for i, e := range x {
				if strs[i], ok = e.(string); !ok {
					return "", nil, errRef
				}
			}
			return strings.Join(strs, " "), nil, nil
		}
		ids, err := refTokenIDs(x)
		return "", ids, err
	}
	return "", nil, errRef
}

func refTokenIDs(v any) ([]uint32, error) {
	if v == nil {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, errRef
	}
	if len(arr) > 0 {
		if _, nested := arr[0].([]any); nested {
			var first []uint32
			for i, e := range arr {
				row, ok := e.([]any)
				if !ok {
					return nil, errRef
				}
				ids, err := refTokenRow(row)
				if err != nil {
					return nil, err
				}
				if i == 0 {
					first = ids
				}
			}
			return first, nil
		}
	}
	return refTokenRow(arr)
}

func refTokenRow(row []any) ([]uint32, error) {
	ids := make([]uint32, 0, len(row))
	for _, e := range row {
		n, ok := e.(json.Number)
		if !ok {
			return nil, errRef
		}
		id, err := strconv.ParseUint(string(n), 10, 32)
		if err != nil {
			return nil, errRef
		}
		ids = append(ids, uint32(id))
	}
	return ids, nil
}
