package loadgentest

import (
	"bufio"
	"strconv"
	"time"
)

// appendToken appends the text of the i-th generated token: one word, one token.
func appendToken(dst []byte, i int) []byte {
	dst = append(dst, 't')
	dst = strconv.AppendInt(dst, int64(i%100), 10)
	return append(dst, ' ')
}

func (s *Server) writeStream(w *bufio.Writer, r *request) {
	buf := make([]byte, 0, 512)
	var text []byte // /generate: cumulative
	event := func(payload []byte) bool {
		_, _ = w.WriteString("data: ")
		_, _ = w.Write(payload)
		_, _ = w.WriteString("\n\n")
		return w.Flush() == nil
	}
	if r.dialect == chat {
		buf = append(buf[:0], `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":`...)
		buf = strconv.AppendQuote(buf, r.model)
		buf = append(buf, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`...)
		if !event(buf) {
			return
		}
	}
	for i := range r.maxTokens {
		if i > 0 && s.opts.TokenDelay > 0 {
			time.Sleep(s.opts.TokenDelay)
		}
		buf = buf[:0]
		switch r.dialect {
		case chat:
			buf = append(buf, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"choices":[{"index":0,"delta":{"content":"`...)
			buf = appendToken(buf, i)
			buf = append(buf, `"},"finish_reason":`...)
			buf = appendFinish(buf, i == r.maxTokens-1)
			buf = append(buf, `}]}`...)
		case completions:
			buf = append(buf, `{"id":"cmpl-1","object":"text_completion","created":0,"choices":[{"index":0,"text":"`...)
			buf = appendToken(buf, i)
			buf = append(buf, `","finish_reason":`...)
			buf = appendFinish(buf, i == r.maxTokens-1)
			buf = append(buf, `}]}`...)
		case generate:
			text = appendToken(text, i)
			buf = append(buf, `{"text":"`...)
			buf = append(buf, text...)
			buf = append(buf, '"')
			if !s.opts.OmitUsage {
				buf = append(buf, `,"meta_info":`...)
				buf = s.appendMeta(buf, r, i+1)
			}
			buf = append(buf, '}')
		}
		if !event(buf) {
			return
		}
	}
	if r.dialect != generate && r.includeUsage && !s.opts.OmitUsage {
		buf = append(buf[:0], `{"id":"x","object":`...)
		if r.dialect == chat {
			buf = append(buf, `"chat.completion.chunk"`...)
		} else {
			buf = append(buf, `"text_completion"`...)
		}
		buf = append(buf, `,"choices":[],"usage":`...)
		buf = s.appendUsage(buf, r)
		buf = append(buf, '}')
		if !event(buf) {
			return
		}
	}
	if !s.opts.OmitDone {
		event([]byte("[DONE]"))
	}
}

func appendFinish(dst []byte, last bool) []byte {
	if last {
		return append(dst, `"length"`...)
	}
	return append(dst, "null"...)
}

// appendWhole renders a non-streamed answer.
func (s *Server) appendWhole(dst []byte, r *request) []byte {
	var text []byte
	for i := range r.maxTokens {
		text = appendToken(text, i)
	}
	switch r.dialect {
	case chat:
		dst = append(dst, `{"id":"chatcmpl-1","object":"chat.completion","created":0,"model":`...)
		dst = strconv.AppendQuote(dst, r.model)
		dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
		dst = append(dst, text...)
		dst = append(dst, `"},"finish_reason":"length"}]`...)
	case completions:
		dst = append(dst, `{"id":"cmpl-1","object":"text_completion","created":0,"choices":[{"index":0,"text":"`...)
		dst = append(dst, text...)
		dst = append(dst, `","finish_reason":"length"}]`...)
	case generate:
		dst = append(dst, `{"text":"`...)
		dst = append(dst, text...)
		dst = append(dst, '"')
		if !s.opts.OmitUsage {
			dst = append(dst, `,"meta_info":`...)
			dst = s.appendMeta(dst, r, r.maxTokens)
		}
		return append(dst, '}')
	}
	if !s.opts.OmitUsage {
		dst = append(dst, `,"usage":`...)
		dst = s.appendUsage(dst, r)
	}
	return append(dst, '}')
}

func (s *Server) appendUsage(dst []byte, r *request) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.promptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.maxTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.promptTokens+r.maxTokens), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.cachedTokens), 10)
	return append(dst, "}}"...)
}

func (s *Server) appendMeta(dst []byte, r *request, completion int) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.promptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(completion), 10)
	dst = append(dst, `,"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(r.cachedTokens), 10)
	return append(dst, '}')
}
