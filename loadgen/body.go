package loadgen

import (
	"strconv"

	"github.com/smg-go/smg/internal/jsonx"
)

// message is one chat message of a request.
type message struct {
	role    string
	content string
}

// bodyBuilder renders request bodies for one endpoint. Bodies are built once per workload
// item (multi-turn: once per turn), never per send.
type bodyBuilder struct {
	endpoint  Endpoint
	model     string
	stream    bool
	ignoreEOS bool
}

func newBodyBuilder(c *Config) bodyBuilder {
	return bodyBuilder{endpoint: c.Endpoint, model: c.Model, stream: c.Stream, ignoreEOS: c.IgnoreEOS}
}

// build renders the body asking for maxTokens tokens after msgs.
func (b bodyBuilder) build(msgs []message, maxTokens int) []byte {
	size := 160
	for _, m := range msgs {
		size += len(m.content) + 40
	}
	dst := make([]byte, 0, size)
	switch b.endpoint {
	case EndpointGenerate:
		dst = append(dst, `{"text":`...)
		dst = appendPromptText(dst, msgs)
		dst = append(dst, `,"sampling_params":{"max_new_tokens":`...)
		dst = strconv.AppendInt(dst, int64(maxTokens), 10)
		dst = append(dst, `,"temperature":0`...)
		if b.ignoreEOS {
			dst = append(dst, `,"ignore_eos":true`...)
		}
		dst = append(dst, '}')
		dst = b.appendStream(dst, false)
		return append(dst, '}')
	case EndpointCompletions:
		dst = append(dst, `{"model":`...)
		dst = jsonx.AppendString(dst, b.model)
		dst = append(dst, `,"prompt":`...)
		dst = appendPromptText(dst, msgs)
	default:
		dst = append(dst, `{"model":`...)
		dst = jsonx.AppendString(dst, b.model)
		dst = append(dst, `,"messages":[`...)
		for i, m := range msgs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"role":`...)
			dst = jsonx.AppendString(dst, m.role)
			dst = append(dst, `,"content":`...)
			dst = jsonx.AppendString(dst, m.content)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(maxTokens), 10)
	dst = append(dst, `,"temperature":0`...)
	if b.ignoreEOS {
		dst = append(dst, `,"ignore_eos":true`...)
	}
	dst = b.appendStream(dst, true)
	return append(dst, '}')
}

// appendStream adds the stream flag; OpenAI endpoints also ask for usage in the last chunk.
func (b bodyBuilder) appendStream(dst []byte, openAI bool) []byte {
	if !b.stream {
		return append(dst, `,"stream":false`...)
	}
	dst = append(dst, `,"stream":true`...)
	if openAI {
		dst = append(dst, `,"stream_options":{"include_usage":true}`...)
	}
	return dst
}

// appendPromptText renders messages as one prompt for the text endpoints: contents joined
// by newlines, so a shared system prompt stays a shared prefix.
func appendPromptText(dst []byte, msgs []message) []byte {
	n := 0
	for _, m := range msgs {
		n += len(m.content) + 1
	}
	text := make([]byte, 0, n)
	for i, m := range msgs {
		if i > 0 {
			text = append(text, '\n')
		}
		text = append(text, m.content...)
	}
	return jsonx.AppendString(dst, string(text))
}
