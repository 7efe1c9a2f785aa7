package openai

import (
	"errors"

	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
)

// Prompt returns the prompt's token ids appended to ids: the chat template rendered over the
// body's messages and encoded without special tokens added (the template writes them), the
// text prompt encoded with them, or the ids the request gave. scratch holds the rendered
// text and is returned for reuse. A chat request to a model without a template, a template
// that rejects the request, and a prompt longer than maxPrompt tokens (0: unknown) are
// *Error. Rendering and encoding a long prompt take milliseconds: never call it on an event
// loop.
func (r *Request) Prompt(tok *tokenizer.Tokenizer, tmpl *chat.Template, body []byte, maxPrompt int, ids []uint32, scratch []byte) ([]uint32, []byte, error) {
	start := len(ids)
	switch {
	case r.Kind == Chat:
		if tmpl == nil {
			return ids, scratch, badf("messages", "model %q has no chat template; send /v1/completions with a prompt instead", r.Model)
		}
		cr, err := chat.DecodeRequest(body)
		if err != nil {
			return ids, scratch, templateError(err)
		}
		scratch, err = tmpl.Render(scratch[:0], cr)
		if err != nil {
			return ids, scratch, templateError(err)
		}
		ids = tok.Encode(ids, string(scratch), false)
	case r.TextSet:
		ids = tok.Encode(ids, r.Text, true)
	default:
		ids = append(ids, r.InputIDs...)
	}
	n := len(ids) - start
	if n == 0 {
		return ids, scratch, badf("prompt", "the prompt is empty")
	}
	if maxPrompt > 0 && n > maxPrompt {
		return ids, scratch, badf("messages", "the prompt has %d tokens; model %q takes at most %d: shorten it", n, r.Model, maxPrompt)
	}
	if v := uint32(tok.VocabSize()); r.TextSet || r.Kind == Chat {
		return ids, scratch, nil
	} else {
		for _, id := range ids[start:] {
			if id >= v {
				return ids, scratch, badf("input_ids", "token id %d is outside the vocabulary of %d tokens", id, v)
			}
		}
	}
	return ids, scratch, nil
}

func templateError(err error) *Error {
	var te *chat.TemplateError
	if errors.As(err, &te) {
		return &Error{Param: "messages", Msg: te.Error()}
	}
	return &Error{Param: "messages", Msg: err.Error()}
}
