package mockworker

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
)

// openTokenizer loads the tokenizer of a model directory with the gateway's own tokenizer,
// so the mock's answer ids are the ids a real engine of that model would send for its text.
func openTokenizer(dir string) (textCodec, error) {
	t, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// modelPrompts is an HTTP engine's front end: it turns a request's prompt into the token ids
// the engine computes, so that its KV blocks and events name real token ids.
type modelPrompts struct {
	tok  *tokenizer.Tokenizer
	tmpl *chat.Template // nil: the model has no chat template
}

// openPrompts loads the tokenizer and the chat template of a model directory.
func openPrompts(dir string) (*modelPrompts, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot load the tokenizer (--tokenizer-path %s): %w", dir, err)
	}
	p := &modelPrompts{tok: tok}
	config, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return p, nil // no template: chat requests are refused with a 400
	}
	if p.tmpl, err = chat.FromTokenizerConfig(config); err != nil {
		return nil, fmt.Errorf("--tokenizer-path %s: tokenizer_config.json: %w", dir, err)
	}
	return p, nil
}

// ids appends the prompt's token ids to dst: for a chat request the template rendered over
// its messages and encoded as it writes its special tokens, else the prompt text encoded with
// the model's special tokens added.
func (p *modelPrompts) ids(dst []uint32, kind genKind, body, text []byte) ([]uint32, error) {
	if kind != kindChat {
		return p.tok.Encode(dst, string(text), true), nil
	}
	if p.tmpl == nil {
		return dst, fmt.Errorf("the model has no chat template (tokenizer_config.json's chat_template); send /v1/completions")
	}
	req, err := chat.DecodeRequest(body)
	if err != nil {
		return dst, err
	}
	rendered, err := p.tmpl.Render(nil, req)
	if err != nil {
		return dst, err
	}
	return p.tok.Encode(dst, string(rendered), false), nil
}
