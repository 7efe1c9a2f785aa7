package loadgen

import (
	"strconv"
	"unicode/utf8"
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
		dst = appendJSONString(dst, b.model)
		dst = append(dst, `,"prompt":`...)
		dst = appendPromptText(dst, msgs)
	default:
		dst = append(dst, `{"model":`...)
		dst = appendJSONString(dst, b.model)
		dst = append(dst, `,"messages":[`...)
		for i, m := range msgs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"role":`...)
			dst = appendJSONString(dst, m.role)
			dst = append(dst, `,"content":`...)
			dst = appendJSONString(dst, m.content)
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
	return appendJSONString(dst, string(text))
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes U+FFFD so the
// body is always valid JSON.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
