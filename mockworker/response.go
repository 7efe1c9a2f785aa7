package mockworker

import "github.com/smg-go/smg/internal/jsonx"

// vocabulary is the mock's output: token i of every answer is vocabulary[i%len]. Each word is
// about bytesPerToken bytes, so re-tokenising an answer by the mock's own rule gives back
// roughly the number of tokens generated.
var vocabulary = [...]string{"the ", "mock ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "ran ", "off "}

func appendTokenText(dst []byte, i int) []byte { return append(dst, vocabulary[i%len(vocabulary)]...) }

// answer describes one generation: everything the response shapes need, nothing borrowed from
// the request buffer, so that a paced stream can outlive the request.
type answer struct {
	kind         genKind
	model        string // already escaped for a JSON string
	id           []byte // response id, e.g. chatcmpl-mock-3; /generate rid, JSON-escaped
	created      int64
	promptTokens int
	cachedTokens int
	outputTokens int
	includeUsage bool
	// kvParams, for a vLLM prefill, is the kv_transfer_params object its answer returns.
	kvParams []byte
}

func (a *answer) appendUsage(dst []byte) []byte {
	dst = appendKeyInt(dst, `"usage":{"prompt_tokens":`, int64(a.promptTokens))
	dst = appendKeyInt(dst, `,"completion_tokens":`, int64(a.outputTokens))
	dst = appendKeyInt(dst, `,"total_tokens":`, int64(a.promptTokens+a.outputTokens))
	dst = appendKeyInt(dst, `,"prompt_tokens_details":{"cached_tokens":`, int64(a.cachedTokens))
	return append(dst, `}}`...)
}

func (a *answer) appendHead(dst []byte, object string) []byte {
	dst = append(dst, `{"id":"`...)
	dst = append(dst, a.id...)
	dst = append(dst, `","object":"`...)
	dst = append(dst, object...)
	dst = appendKeyInt(dst, `","created":`, a.created)
	dst = append(dst, `,"model":"`...)
	dst = append(dst, a.model...)
	return append(dst, `",`...)
}

// appendMetaInfo writes SGLang's meta_info for a /generate answer after `done` tokens.
func (a *answer) appendMetaInfo(dst []byte, done int, finished bool) []byte {
	dst = append(dst, `"meta_info":{"id":"`...)
	dst = append(dst, a.id...)
	dst = appendKeyInt(dst, `","prompt_tokens":`, int64(a.promptTokens))
	dst = appendKeyInt(dst, `,"completion_tokens":`, int64(done))
	dst = appendKeyInt(dst, `,"cached_tokens":`, int64(a.cachedTokens))
	if finished {
		dst = appendKeyInt(dst, `,"finish_reason":{"type":"length","length":`, int64(done))
		return append(dst, `}}`...)
	}
	return append(dst, `,"finish_reason":null}`...)
}

// appendBody writes the whole non-streamed response body.
func (a *answer) appendBody(dst []byte) []byte {
	switch a.kind {
	case kindChat:
		dst = a.appendHead(dst, "chat.completion")
		dst = append(dst, `"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
		dst = a.appendText(dst, a.outputTokens)
		dst = append(dst, `"},"finish_reason":"length"}],`...)
		dst = a.appendUsage(dst)
	case kindCompletion:
		dst = a.appendHead(dst, "text_completion")
		dst = append(dst, `"choices":[{"index":0,"text":"`...)
		dst = a.appendText(dst, a.outputTokens)
		dst = append(dst, `","logprobs":null,"finish_reason":"length"}],`...)
		dst = a.appendUsage(dst)
	default:
		dst = append(dst, `{"text":"`...)
		dst = a.appendText(dst, a.outputTokens)
		dst = append(dst, `",`...)
		dst = a.appendMetaInfo(dst, a.outputTokens, true)
	}
	if a.kvParams != nil {
		dst = append(dst, `,"kv_transfer_params":`...)
		dst = append(dst, a.kvParams...)
	}
	return append(dst, '}')
}

func (a *answer) appendText(dst []byte, n int) []byte {
	for i := range n {
		dst = appendTokenText(dst, i)
	}
	return dst
}

// appendEvent writes the server-sent event(s) for token i (0-based). The event of the last
// token also carries the usage chunk (OpenAI routes, when asked with
// stream_options.include_usage) and the closing "data: [DONE]".
func (a *answer) appendEvent(dst []byte, i int) []byte {
	last := i == a.outputTokens-1
	dst = append(dst, "data: "...)
	switch a.kind {
	case kindChat:
		dst = a.appendHead(dst, "chat.completion.chunk")
		dst = append(dst, `"choices":[{"index":0,"delta":{`...)
		if i == 0 {
			dst = append(dst, `"role":"assistant",`...)
		}
		dst = append(dst, `"content":"`...)
		dst = appendTokenText(dst, i)
		dst = append(dst, `"},"finish_reason":`...)
		dst = appendFinish(dst, last)
		dst = append(dst, `}]}`...)
	case kindCompletion:
		dst = a.appendHead(dst, "text_completion")
		dst = append(dst, `"choices":[{"index":0,"text":"`...)
		dst = appendTokenText(dst, i)
		dst = append(dst, `","logprobs":null,"finish_reason":`...)
		dst = appendFinish(dst, last)
		dst = append(dst, `}]}`...)
	default:
		// SGLang streams the cumulative text so far in every chunk.
		dst = append(dst, `{"text":"`...)
		dst = a.appendText(dst, i+1)
		dst = append(dst, `",`...)
		dst = a.appendMetaInfo(dst, i+1, last)
		dst = append(dst, '}')
	}
	dst = append(dst, "\n\n"...)
	if !last {
		return dst
	}
	if a.includeUsage && a.kind != kindGenerate {
		object := "chat.completion.chunk"
		if a.kind == kindCompletion {
			object = "text_completion"
		}
		dst = append(dst, "data: "...)
		dst = a.appendHead(dst, object)
		dst = append(dst, `"choices":[],`...)
		dst = a.appendUsage(dst)
		dst = append(dst, "}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

func appendFinish(dst []byte, last bool) []byte {
	if last {
		return append(dst, `"length"`...)
	}
	return append(dst, "null"...)
}

// appendErrorBody writes the OpenAI error envelope.
func appendErrorBody(dst []byte, status int, typ, msg string) []byte {
	dst = append(dst, `{"error":{"message":"`...)
	dst = jsonx.AppendEscaped(dst, msg)
	dst = append(dst, `","type":"`...)
	dst = append(dst, typ...)
	dst = appendKeyInt(dst, `","param":null,"code":`, int64(status))
	return append(dst, `}}`...)
}
