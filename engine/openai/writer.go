package openai

import (
	"strconv"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/internal/jsonx"
	"github.com/smg-go/smg/tokenizer/stream"
)

// Writer turns one request's engine chunks into its answer (see the package doc). The zero
// value is ready for Reset.
type Writer struct {
	kind         Kind
	stream       bool
	includeUsage bool
	id, model    string
	created      int64
	// prompt is the prompt's token count; the engine's own count wins when it reports one.
	prompt  uint32
	cached  uint32
	choices []choice
	left    int // choices not finished
	text    []byte
}

type choice struct {
	dec      stream.StopDecoder
	text     []byte   // the whole text: unstreamed answers and /generate's cumulative text
	ids      []uint32 // /generate's output ids
	started  bool     // the chat role chunk was sent
	done     bool
	sawIDs   bool
	finish   string
	matched  grpcworker.MatchedStopKind
	matchID  uint32
	matchStr string
	seen     uint32 // token ids relayed
	tokens   uint32 // completion tokens: the engine's count, at least seen
}

// Reset readies w for req's answer: id and created as the answer carries them, dec the
// model's tokenizer, eos its EOS ids, promptTokens the prompt's length (the engine's count
// replaces it when reported).
func (w *Writer) Reset(req *Request, dec stream.Decoder, eos []uint32, id string, created int64, promptTokens int) {
	w.kind, w.stream, w.includeUsage = req.Kind, req.Stream, req.IncludeUsage
	w.id, w.model, w.created = id, req.Model, created
	w.prompt, w.cached = uint32(promptTokens), 0
	n := max(req.N, 1)
	if cap(w.choices) < n {
		w.choices = append(w.choices[:cap(w.choices)], make([]choice, n-cap(w.choices))...)
	}
	w.choices = w.choices[:n]
	opts := req.StopOptions(eos)
	for i := range w.choices {
		c := &w.choices[i]
		c.dec.Reset(dec, &opts)
		*c = choice{dec: c.dec, text: c.text[:0], ids: c.ids[:0]}
	}
	w.left = n
}

// Done reports whether every choice has finished: the engine's stream may be closed.
func (w *Writer) Done() bool { return w.left == 0 }

// Feed takes one engine chunk and appends to dst the events a streamed answer sends now
// (nothing for an unstreamed one). A chunk for a finished choice only updates its counts.
func (w *Writer) Feed(dst []byte, ch *grpcworker.Chunk) []byte {
	if int(ch.Index) >= len(w.choices) {
		return dst // the client checks indexes; a bad one was refused there
	}
	c := &w.choices[ch.Index]
	if ch.PromptTokens > 0 {
		w.prompt = ch.PromptTokens
	}
	if ch.CachedTokens > 0 {
		w.cached = ch.CachedTokens
	}
	if ch.CompletionTokens > c.tokens {
		c.tokens = ch.CompletionTokens
	}
	if c.done {
		return dst
	}
	finished := w.decode(c, ch)
	if !w.stream {
		return dst
	}
	return w.events(dst, c, ch.Index, finished)
}

// decode detokenizes the chunk ch of the open choice c into w.text (kept in c.text too for
// an answer sent whole, and /generate's) and reports whether it finished the choice: a stop
// string or token found, or the engine's final chunk.
func (w *Writer) decode(c *choice, ch *grpcworker.Chunk) (finished bool) {
	ids := ch.TokenIDs
	if len(ids) > 0 {
		c.sawIDs = true
	} else if ch.Final && !c.sawIDs {
		ids = ch.OutputIDs // an engine that sent the whole output only at the end
	}
	w.text = w.text[:0]
	var res stream.Result
	steps := 0
	for _, id := range ids {
		steps++
		if w.text, res = c.dec.Step(w.text, id); res.Done() {
			break
		}
	}
	if w.kind == Generate {
		c.ids = append(c.ids, ids[:steps]...)
	}
	c.seen += uint32(steps)
	c.tokens = max(c.tokens, c.seen)
	finished = res.Done()
	switch {
	case finished:
		c.finish = "stop"
		if res.Finish == stream.StopString {
			c.matched, c.matchStr = grpcworker.MatchedString, res.StopString
		} else {
			c.matched, c.matchID = grpcworker.MatchedTokenID, res.StopToken
		}
	case ch.Final:
		w.text, res = c.dec.Flush(w.text)
		finished = true
		if res.Finish == stream.StopString {
			c.finish, c.matched, c.matchStr = "stop", grpcworker.MatchedString, res.StopString
		} else {
			c.finish, c.matched, c.matchID, c.matchStr = ch.FinishReason, ch.MatchedStop, ch.MatchedTokenID, ch.MatchedStopString
			if c.finish == "" {
				c.finish = "stop"
			}
		}
	}
	if finished {
		c.done = true
		w.left--
	}
	if !w.stream || w.kind == Generate {
		c.text = append(c.text, w.text...)
	}
	return finished
}

// events appends the stream events of choice index (c) for the text decode just left in
// w.text, and its finish when finished.
func (w *Writer) events(dst []byte, c *choice, index uint32, finished bool) []byte {
	switch w.kind {
	case Chat:
		if !c.started {
			c.started = true
			dst = w.chatChunk(dst, index, "role", nil)
		}
		if len(w.text) > 0 {
			dst = w.chatChunk(dst, index, "content", w.text)
		}
		if finished {
			dst = w.chatChunk(dst, index, "finish", nil)
		}
	case Completion:
		if len(w.text) > 0 || finished {
			dst = w.completionChunk(dst, index, w.text, finished)
		}
	case Generate:
		if len(w.text) > 0 || finished {
			dst = append(dst, "data: "...)
			dst = w.generateObject(dst, index, finished)
			dst = append(dst, "\n\n"...)
		}
	}
	return dst
}

// End appends the rest of the answer once the engine's stream ended (io.EOF) or Done:
// choices still open are flushed and finished with reason finish ("abort" when the stream
// was cut, for instance); then the usage chunk and [DONE] of a streamed answer, or the whole
// body of an unstreamed one.
func (w *Writer) End(dst []byte, finish string) []byte {
	for i := range w.choices {
		c := &w.choices[i]
		if c.done {
			continue
		}
		var res stream.Result
		w.text, res = c.dec.Flush(w.text[:0])
		c.done, c.finish = true, finish
		if res.Finish == stream.StopString {
			c.finish, c.matched, c.matchStr = "stop", grpcworker.MatchedString, res.StopString
		}
		w.left--
		if !w.stream || w.kind == Generate {
			c.text = append(c.text, w.text...)
		}
		if w.stream {
			dst = w.events(dst, c, uint32(i), true)
		}
	}
	if w.stream {
		if w.includeUsage && w.kind != Generate {
			dst = w.head(dst, true)
			dst = append(dst, `"choices":[],"usage":`...)
			dst = w.usage(dst)
			dst = append(dst, "}\n\n"...)
		}
		return append(dst, "data: [DONE]\n\n"...)
	}
	return w.wholeBody(dst)
}

// wholeBody appends the whole body of an unstreamed answer whose choices have all finished.
func (w *Writer) wholeBody(dst []byte) []byte {
	switch w.kind {
	case Generate:
		if len(w.choices) > 1 {
			dst = append(dst, '[')
		}
		for i := range w.choices {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.generateObject(dst, uint32(i), true)
		}
		if len(w.choices) > 1 {
			dst = append(dst, ']')
		}
		return dst
	default:
		dst = w.head(dst, false)
		dst = append(dst, `"choices":[`...)
		for i := range w.choices {
			c := &w.choices[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"index":`...)
			dst = strconv.AppendInt(dst, int64(i), 10)
			if w.kind == Chat {
				dst = append(dst, `,"message":{"role":"assistant","content":`...)
				dst = jsonx.AppendString(dst, bstr(c.text))
				dst = append(dst, `,"reasoning_content":null,"tool_calls":null}`...)
			} else {
				dst = append(dst, `,"text":`...)
				dst = jsonx.AppendString(dst, bstr(c.text))
			}
			dst = append(dst, `,"logprobs":null,`...)
			dst = c.appendFinish(dst)
			dst = append(dst, '}')
		}
		dst = append(dst, `],"usage":`...)
		dst = w.usage(dst)
		return append(dst, `,"metadata":null}`...)
	}
}

// AppendStreamError appends the event that ends a streamed answer the engine broke off
// after its first byte: the error in the gateway's envelope, then [DONE].
func AppendStreamError(dst []byte, message, typ, code string) []byte {
	dst = append(dst, `data: {"error":{"message":`...)
	dst = jsonx.AppendString(dst, message)
	dst = append(dst, `,"type":`...)
	dst = jsonx.AppendString(dst, typ)
	dst = append(dst, `,"code":`...)
	dst = jsonx.AppendString(dst, code)
	return append(dst, ",\"param\":null}}\n\ndata: [DONE]\n\n"...)
}

// head appends an object's id, object, created and model, with the "data: " prefix of an
// event when sse.
func (w *Writer) head(dst []byte, sse bool) []byte {
	if sse {
		dst = append(dst, "data: "...)
	}
	dst = append(dst, `{"id":`...)
	dst = jsonx.AppendString(dst, w.id)
	switch {
	case w.kind == Chat && sse:
		dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
	case w.kind == Chat:
		dst = append(dst, `,"object":"chat.completion","created":`...)
	default:
		dst = append(dst, `,"object":"text_completion","created":`...)
	}
	dst = strconv.AppendInt(dst, w.created, 10)
	dst = append(dst, `,"model":`...)
	dst = jsonx.AppendString(dst, w.model)
	return append(dst, ',')
}

// chatChunk appends one chat.completion.chunk event for choice i: the role chunk, a content
// delta, or the finish chunk (an empty delta with finish_reason and matched_stop).
func (w *Writer) chatChunk(dst []byte, i uint32, what string, text []byte) []byte {
	dst = w.head(dst, true)
	dst = append(dst, `"choices":[{"index":`...)
	dst = strconv.AppendUint(dst, uint64(i), 10)
	switch what {
	case "role":
		dst = append(dst, `,"delta":{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}]`...)
	case "content":
		dst = append(dst, `,"delta":{"role":null,"content":`...)
		dst = jsonx.AppendString(dst, bstr(text))
		dst = append(dst, `,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}]`...)
	default:
		dst = append(dst, `,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,`...)
		dst = w.choices[i].appendFinish(dst)
		dst = append(dst, '}', ']')
	}
	return append(dst, ",\"usage\":null}\n\n"...)
}

func (w *Writer) completionChunk(dst []byte, i uint32, text []byte, finished bool) []byte {
	dst = w.head(dst, true)
	dst = append(dst, `"choices":[{"index":`...)
	dst = strconv.AppendUint(dst, uint64(i), 10)
	dst = append(dst, `,"text":`...)
	dst = jsonx.AppendString(dst, bstr(text))
	dst = append(dst, `,"logprobs":null,`...)
	if finished {
		dst = w.choices[i].appendFinish(dst)
	} else {
		dst = append(dst, `"finish_reason":null,"matched_stop":null`...)
	}
	return append(dst, "}],\"usage\":null}\n\n"...)
}

// appendFinish appends "finish_reason" and "matched_stop" (a token id, a string or null).
func (c *choice) appendFinish(dst []byte) []byte {
	dst = append(dst, `"finish_reason":`...)
	dst = jsonx.AppendString(dst, c.finish)
	dst = append(dst, `,"matched_stop":`...)
	switch c.matched {
	case grpcworker.MatchedTokenID:
		dst = strconv.AppendUint(dst, uint64(c.matchID), 10)
	case grpcworker.MatchedString:
		dst = jsonx.AppendString(dst, c.matchStr)
	default:
		dst = append(dst, "null"...)
	}
	return dst
}

// PromptTokens returns the prompt's token count and how many of them the engine found in its
// prefix cache, as the usage reports them (the engine's counts once it sent them).
func (w *Writer) PromptTokens() (prompt, cached uint32) { return w.prompt, w.cached }

// CompletionTokens returns the tokens generated so far over every choice, as the usage
// reports them.
func (w *Writer) CompletionTokens() uint64 {
	var completion uint64
	for i := range w.choices {
		completion += uint64(w.choices[i].tokens)
	}
	return completion
}

// usage appends SGLang's UsageInfo: the prompt counted once, whatever n (as SGLang counts
// it), the completion tokens of every choice.
func (w *Writer) usage(dst []byte) []byte {
	completion := w.CompletionTokens()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(w.prompt), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(w.prompt)+completion, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendUint(dst, completion, 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(w.cached), 10)
	return append(dst, `},"reasoning_tokens":0}`...)
}

// generateObject appends SGLang's /generate answer object for choice i: the text and output
// ids so far and meta_info (finish_reason null until finished).
func (w *Writer) generateObject(dst []byte, i uint32, finished bool) []byte {
	c := &w.choices[i]
	dst = append(dst, `{"text":`...)
	dst = jsonx.AppendString(dst, bstr(c.text))
	dst = append(dst, `,"output_ids":[`...)
	for j, id := range c.ids {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(id), 10)
	}
	dst = append(dst, `],"meta_info":{"id":`...)
	dst = jsonx.AppendString(dst, w.id)
	dst = append(dst, `,"finish_reason":`...)
	if !finished {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"type":`...)
		dst = jsonx.AppendString(dst, c.finish)
		switch {
		case c.matched == grpcworker.MatchedTokenID:
			dst = append(dst, `,"matched":`...)
			dst = strconv.AppendUint(dst, uint64(c.matchID), 10)
		case c.matched == grpcworker.MatchedString:
			dst = append(dst, `,"matched":`...)
			dst = jsonx.AppendString(dst, c.matchStr)
		case c.finish == "length":
			dst = append(dst, `,"length":`...)
			dst = strconv.AppendUint(dst, uint64(c.tokens), 10)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"prompt_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(w.prompt), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(c.tokens), 10)
	dst = append(dst, `,"cached_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(w.cached), 10)
	dst = append(dst, `}`...)
	if len(w.choices) > 1 {
		dst = append(dst, `,"index":`...)
		dst = strconv.AppendUint(dst, uint64(i), 10)
	}
	return append(dst, '}')
}
