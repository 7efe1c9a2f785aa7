package mockworker

import (
	"errors"
	"fmt"

	"github.com/valyala/fastjson"
)

// genKind is which generation API a request used; it decides the response shapes.
type genKind uint8

const (
	kindChat       genKind = iota // POST /v1/chat/completions
	kindCompletion                // POST /v1/completions
	kindGenerate                  // POST /generate (SGLang native)
)

// genRequest is what a worker needs from a generation request body. It holds no views into
// the request buffer except prompt, which aliases the caller's scratch buffer.
type genRequest struct {
	kind         genKind
	stream       bool
	includeUsage bool // stream_options.include_usage (OpenAI routes)
	maxTokens    int  // requested output tokens; 0 means "not given"
	promptTokens int  // ~4 bytes of text per token plus one per input id
	// prompt is the routing text as the gateway sees it (chat: every message content in order;
	// completions: prompt; /generate: text), appended to the scratch buffer given to the parser.
	prompt []byte
	// inputIDs counts token ids sent instead of text (/generate input_ids, completions arrays).
	inputIDs int
	// ids holds those token ids in order, appended to the caller's id scratch buffer.
	ids []uint32
	// rid is the SGLang request id (/generate "rid"), copied; empty when absent.
	rid string
}

// Parse errors are client errors (400) whose text tells the caller what to fix.
var (
	errNotObject      = errors.New("request body must be a JSON object")
	errNoMessages     = errors.New(`"messages" is required and must be a non-empty array`)
	errNoPrompt       = errors.New(`"prompt" is required (a string, an array of strings or of token ids)`)
	errNoText         = errors.New(`"text" or "input_ids" is required`)
	errBadMaxTokens   = errors.New("the maximum number of tokens must be an integer of at least 1")
	errBadStreamField = errors.New(`"stream" must be a boolean`)
)

// bytesPerToken is the mock tokenizer's ratio: one prompt token per 4 bytes of UTF-8 text,
// rounded up, the usual rule of thumb for English text under BPE tokenizers.
const bytesPerToken = 4

// maxTokensLimit bounds what a request may ask for, so that a fuzzed or hostile body cannot make
// the mock build an unbounded response.
const maxTokensLimit = 1 << 20

// parseGenRequest extracts the fields a worker needs. The prompt text is appended to scratch
// and token ids to idScratch.
func parseGenRequest(p *fastjson.Parser, kind genKind, body, scratch []byte, idScratch []uint32) (genRequest, error) {
	r := genRequest{kind: kind, prompt: scratch[:0], ids: idScratch[:0]}
	v, err := p.ParseBytes(body)
	if err != nil {
		return r, fmt.Errorf("request body is not valid JSON: %w", err)
	}
	return r, r.read(v)
}

// read fills r from the parsed body v.
func (r *genRequest) read(v *fastjson.Value) error {
	if v.Type() != fastjson.TypeObject {
		return errNotObject
	}
	if s := setMember(v, "stream"); s != nil {
		b, err := s.Bool()
		if err != nil {
			return errBadStreamField
		}
		r.stream = b
	}
	var err error
	switch r.kind {
	case kindChat:
		err = r.readChat(v)
	case kindCompletion:
		err = r.readCompletion(v)
	default:
		err = r.readGenerate(v)
	}
	if err != nil {
		return err
	}
	r.promptTokens = (len(r.prompt)+bytesPerToken-1)/bytesPerToken + r.inputIDs
	return nil
}

func (r *genRequest) readChat(v *fastjson.Value) error {
	msgs := arrayOf(member(v, "messages"))
	if len(msgs) == 0 {
		return errNoMessages
	}
	for _, m := range msgs {
		c := member(m, "content")
		if c == nil {
			continue
		}
		switch c.Type() {
		case fastjson.TypeString:
			r.prompt = append(r.prompt, c.GetStringBytes()...)
		case fastjson.TypeArray:
			for _, part := range c.GetArray() {
				r.prompt = append(r.prompt, stringOf(member(part, "text"))...)
			}
		}
	}
	r.readOpenAIOptions(v)
	if err := r.readMaxTokens(v, "max_completion_tokens"); err != nil || r.maxTokens > 0 {
		return err
	}
	return r.readMaxTokens(v, "max_tokens")
}

func (r *genRequest) readCompletion(v *fastjson.Value) error {
	p := member(v, "prompt")
	if p == nil || !r.readTextOrIDs(p) {
		return errNoPrompt
	}
	r.readOpenAIOptions(v)
	return r.readMaxTokens(v, "max_tokens")
}

func (r *genRequest) readGenerate(v *fastjson.Value) error {
	found := false
	if t := setMember(v, "text"); t != nil {
		found = r.readTextOrIDs(t)
	}
	if ids := setMember(v, "input_ids"); ids != nil {
		found = r.readTextOrIDs(ids) || found
	}
	if !found {
		return errNoText
	}
	if rid := stringOf(member(v, "rid")); len(rid) > 0 {
		r.rid = string(rid)
	}
	if sp := member(v, "sampling_params"); sp != nil {
		return r.readMaxTokens(sp, "max_new_tokens")
	}
	return nil
}

// readTextOrIDs accepts a string, a token id, or arrays of them (nested once, as batches).
func (r *genRequest) readTextOrIDs(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeString:
		r.prompt = append(r.prompt, v.GetStringBytes()...)
		return true
	case fastjson.TypeNumber:
		r.addID(v)
		return true
	case fastjson.TypeArray:
		arr := v.GetArray()
		for _, e := range arr {
			switch e.Type() {
			case fastjson.TypeString:
				r.prompt = append(r.prompt, e.GetStringBytes()...)
			case fastjson.TypeNumber:
				r.addID(e)
			case fastjson.TypeArray:
				for _, id := range e.GetArray() {
					if id.Type() == fastjson.TypeNumber {
						r.addID(id)
					}
				}
			}
		}
		return len(arr) > 0
	}
	return false
}

// addID counts a token id and keeps it (as the low 32 bits; ids are vocabulary indexes).
func (r *genRequest) addID(v *fastjson.Value) {
	r.inputIDs++
	n, _ := v.Int64()
	r.ids = append(r.ids, uint32(n))
}

func (r *genRequest) readOpenAIOptions(v *fastjson.Value) {
	if so := member(v, "stream_options"); so != nil {
		r.includeUsage = boolOf(member(so, "include_usage"))
	}
}

// readMaxTokens sets maxTokens from v[key] when present and not null.
func (r *genRequest) readMaxTokens(v *fastjson.Value, key string) error {
	m := setMember(v, key)
	if m == nil {
		return nil
	}
	n, err := m.Int()
	if err != nil || n < 1 || n > maxTokensLimit {
		return fmt.Errorf("%q: %w (at most %d)", key, errBadMaxTokens, maxTokensLimit)
	}
	r.maxTokens = n
	return nil
}

// member returns the member key of the object v, or nil. When the object repeats the key,
// the last occurrence wins, as Python's json module (and so SGLang and vLLM) reads it and as
// the gateway's extractor does; fastjson's own Get returns the first.
func member(v *fastjson.Value, key string) *fastjson.Value {
	o, err := v.Object()
	if err != nil {
		return nil
	}
	var last *fastjson.Value
	o.Visit(func(k []byte, m *fastjson.Value) {
		if string(k) == key {
			last = m
		}
	})
	return last
}

// setMember is the member key of the object v, or nil when it is absent or null (a member
// set to null reads as left out).
func setMember(v *fastjson.Value, key string) *fastjson.Value {
	if m := member(v, key); m != nil && m.Type() != fastjson.TypeNull {
		return m
	}
	return nil
}

// arrayOf, stringOf and boolOf are v's value when it has that type, else the zero value.
func arrayOf(v *fastjson.Value) []*fastjson.Value {
	if v == nil || v.Type() != fastjson.TypeArray {
		return nil
	}
	return v.GetArray()
}

func stringOf(v *fastjson.Value) []byte {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil
	}
	return v.GetStringBytes()
}

func boolOf(v *fastjson.Value) bool { return v != nil && v.Type() == fastjson.TypeTrue }
