package chat

import "github.com/ardanlabs/jinja"

// Request holds the parts of an OpenAI chat completion request that a chat
// template sees. Values keep JSON object key order (see DecodeJSON). Fields
// left Undefined are absent from the request.
type Request struct {
	// Messages is the list of message objects, passed to the template as
	// messages after the content-format and tool-argument rules.
	Messages jinja.Value
	// Tools is the tools list (the template sees none when absent).
	Tools jinja.Value
	// Documents is the documents list (the template sees none when absent).
	Documents jinja.Value
	// ToolChoice is passed as the extra variable tool_choice when present;
	// transformers itself does not pass it.
	ToolChoice jinja.Value
	// ReasoningEffort is passed as reasoning_effort when present.
	ReasoningEffort jinja.Value
	// Kwargs is chat_template_kwargs: each key becomes a template variable,
	// overriding every variable above and the special tokens.
	Kwargs jinja.Value
	// AddGenerationPrompt is add_generation_prompt (true unless the request
	// sets it to false).
	AddGenerationPrompt bool
}

// DecodeRequest reads the template-relevant fields of an OpenAI chat
// completion request body: messages (required, a list of objects), tools,
// documents, tool_choice, reasoning_effort, chat_template_kwargs (an object)
// and add_generation_prompt (a bool, default true). Other fields are ignored.
// Errors are *TemplateError with PhaseInput.
func DecodeRequest(body []byte) (*Request, error) {
	v, err := DecodeJSON(body)
	if err != nil {
		return nil, &TemplateError{Phase: PhaseInput, Msg: err.Error(), Err: err}
	}
	if !v.IsDict() {
		return nil, inputErrorf("request body is not a JSON object")
	}
	d := v.AsDict()
	get := func(k string) jinja.Value {
		if x, ok := d.Get(k); ok {
			return x
		}
		return jinja.Undefined()
	}
	req := &Request{
		Messages:            get("messages"),
		Tools:               get("tools"),
		Documents:           get("documents"),
		ToolChoice:          get("tool_choice"),
		ReasoningEffort:     get("reasoning_effort"),
		Kwargs:              get("chat_template_kwargs"),
		AddGenerationPrompt: true,
	}
	if !req.Messages.IsList() {
		return nil, inputErrorf("messages must be a list")
	}
	for i, m := range req.Messages.AsList().Items {
		if !m.IsDict() {
			return nil, inputErrorf("messages[%d] is not an object", i)
		}
	}
	if !req.Kwargs.IsUndefined() && !req.Kwargs.IsNone() && !req.Kwargs.IsDict() {
		return nil, inputErrorf("chat_template_kwargs must be an object")
	}
	if agp := get("add_generation_prompt"); !agp.IsUndefined() && !agp.IsNone() {
		if !agp.IsBool() {
			return nil, inputErrorf("add_generation_prompt must be a boolean")
		}
		req.AddGenerationPrompt = agp.AsBool()
	}
	return req, nil
}
