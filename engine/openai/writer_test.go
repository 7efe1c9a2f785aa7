package openai

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
)

var words = wordDecoder{"Hello", " world", "!", " ST", "OP", " more"}

const eos = 10

// run feeds chunks to a Writer for body on route k and returns the whole answer.
func run(t *testing.T, k Kind, body string, chunks []grpcworker.Chunk) string {
	t.Helper()
	var r Request
	if err := Parse(k, []byte(body), &r); err != nil {
		t.Fatal(err)
	}
	var w Writer
	w.Reset(&r, words, []uint32{eos}, "rid-1", 1700000000, 7)
	var out []byte
	for i := range chunks {
		out = w.Feed(out, &chunks[i])
	}
	return string(w.End(out, "abort"))
}

func tokens(i uint32, ids ...uint32) grpcworker.Chunk {
	return grpcworker.Chunk{Index: i, TokenIDs: ids, PromptTokens: 7}
}

func final(i uint32, reason string, completion uint32) grpcworker.Chunk {
	return grpcworker.Chunk{Index: i, Final: true, FinishReason: reason, PromptTokens: 7, CompletionTokens: completion, CachedTokens: 3}
}

// The shapes are SGLang's ChatCompletionStreamResponse and friends serialized with pydantic's
// model_dump_json: every declared field present, null when unset, in declaration order.
func TestChatStreamShape(t *testing.T) {
	got := run(t, Chat, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, []grpcworker.Chunk{
		tokens(0, 0), tokens(0, 1, 2), {Index: 0, Final: true, FinishReason: "stop", MatchedStop: grpcworker.MatchedTokenID, MatchedTokenID: eos, PromptTokens: 7, CompletionTokens: 4, CachedTokens: 3, TokenIDs: []uint32{eos}},
	})
	head := `data: {"id":"rid-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":`
	want := head + `{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}` + "\n\n" +
		head + `{"role":null,"content":"Hello","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}` + "\n\n" +
		head + `{"role":null,"content":" world!","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}` + "\n\n" +
		head + `{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":10}],"usage":null}` + "\n\n" +
		`data: {"id":"rid-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":7,"total_tokens":11,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":3},"reasoning_tokens":0}}` + "\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestChatUnstreamedShape(t *testing.T) {
	got := run(t, Chat, `{"model":"m","n":2,"stop":"STOP"}`, []grpcworker.Chunk{
		tokens(0, 0, 1), tokens(1, 0), tokens(0, 3, 4, 5), final(0, "stop", 5), tokens(1, 5), final(1, "length", 2),
	})
	want := `{"id":"rid-1","object":"chat.completion","created":1700000000,"model":"m","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":"Hello world ","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":"STOP"},` +
		`{"index":1,"message":{"role":"assistant","content":"Hello more","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"length","matched_stop":null}],` +
		`"usage":{"prompt_tokens":7,"total_tokens":14,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":3},"reasoning_tokens":0},"metadata":null}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !json.Valid([]byte(got)) {
		t.Fatal("invalid JSON")
	}
}

// A stop string the detokenizer sees finishes the choice before the engine says so: the
// finish chunk goes at once and Done reports it, so the caller can abort the engine.
func TestStopStringFinishesEarly(t *testing.T) {
	var r Request
	if err := Parse(Chat, []byte(`{"stream":true,"stop":["STOP"]}`), &r); err != nil {
		t.Fatal(err)
	}
	var w Writer
	w.Reset(&r, words, []uint32{eos}, "x", 1, 1)
	out := w.Feed(nil, &grpcworker.Chunk{TokenIDs: []uint32{0, 3}})
	if w.Done() || strings.Contains(string(out), "ST") {
		t.Fatalf("held text leaked or finished early: %s", out)
	}
	out = w.Feed(out[:0], &grpcworker.Chunk{TokenIDs: []uint32{4, 5}})
	if !w.Done() || !strings.Contains(string(out), `"finish_reason":"stop","matched_stop":"STOP"`) || strings.Contains(string(out), "more") {
		t.Fatalf("after the stop: done %v\n%s", w.Done(), out)
	}
	if got := string(w.End(nil, "abort")); got != "data: [DONE]\n\n" {
		t.Fatalf("end: %q", got)
	}
}

func TestNoStopTrimKeepsTheStop(t *testing.T) {
	got := run(t, Completion, `{"prompt":"p","stop":"STOP","no_stop_trim":true}`, []grpcworker.Chunk{tokens(0, 0, 3, 4, 5), final(0, "stop", 3)})
	if !strings.Contains(got, `"text":"Hello STOP","logprobs":null,"finish_reason":"stop","matched_stop":"STOP"`) {
		t.Fatal(got)
	}
}

func TestCompletionStreamShape(t *testing.T) {
	got := run(t, Completion, `{"model":"m","prompt":"p","stream":true}`, []grpcworker.Chunk{tokens(0, 0), tokens(0, 1), final(0, "length", 2)})
	head := `data: {"id":"rid-1","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":0,`
	want := head + `"text":"Hello","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}` + "\n\n" +
		head + `"text":" world","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}` + "\n\n" +
		head + `"text":"","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}` + "\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGenerateShapes(t *testing.T) {
	got := run(t, Generate, `{"input_ids":[1],"sampling_params":{"max_new_tokens":2}}`, []grpcworker.Chunk{tokens(0, 0), tokens(0, 1), final(0, "length", 2)})
	want := `{"text":"Hello world","output_ids":[0,1],"meta_info":{"id":"rid-1","finish_reason":{"type":"length","length":2},"prompt_tokens":7,"completion_tokens":2,"cached_tokens":3}}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	got = run(t, Generate, `{"text":"t","stream":true}`, []grpcworker.Chunk{tokens(0, 0), tokens(0, 1, eos), final(0, "stop", 3)})
	want = `data: {"text":"Hello","output_ids":[0],"meta_info":{"id":"rid-1","finish_reason":null,"prompt_tokens":7,"completion_tokens":1,"cached_tokens":0}}` + "\n\n" +
		`data: {"text":"Hello world","output_ids":[0,1,10],"meta_info":{"id":"rid-1","finish_reason":{"type":"stop","matched":10},"prompt_tokens":7,"completion_tokens":3,"cached_tokens":0}}` + "\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// An engine that sends the whole output only in the final chunk (an unstreamed call) gets the
// same text.
func TestOutputIDsOnlyInFinal(t *testing.T) {
	got := run(t, Completion, `{"prompt":"p"}`, []grpcworker.Chunk{{Final: true, FinishReason: "length", OutputIDs: []uint32{0, 1}, CompletionTokens: 2}})
	if !strings.Contains(got, `"text":"Hello world"`) || !strings.Contains(got, `"completion_tokens":2`) {
		t.Fatal(got)
	}
}

// A stream cut before a choice finished ends it with the given reason.
func TestEndFinishesOpenChoices(t *testing.T) {
	got := run(t, Chat, `{"stream":true,"n":2}`, []grpcworker.Chunk{tokens(1, 0)})
	var finishes []string
	for _, ev := range strings.Split(strings.TrimSpace(got), "\n\n") {
		p := strings.TrimPrefix(ev, "data: ")
		if p == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Index        int
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Choices[0].FinishReason != nil {
			finishes = append(finishes, *c.Choices[0].FinishReason)
		}
	}
	if !reflect.DeepEqual(finishes, []string{"abort", "abort"}) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("finishes %v\n%s", finishes, got)
	}
}

func TestAppendStreamError(t *testing.T) {
	got := string(AppendStreamError(nil, `engine "gone"`, "server_error", "worker_stream_failed"))
	want := `data: {"error":{"message":"engine \"gone\"","type":"server_error","code":"worker_stream_failed","param":null}}` + "\n\ndata: [DONE]\n\n"
	if got != want {
		t.Fatalf("%s", got)
	}
}

// The real Qwen3 tokenizer: streamed deltas of a chat answer concatenate to the text one
// Decode gives, with the EOS token hidden.
func TestRealTokenizerStream(t *testing.T) {
	tok := qwen3(t)
	text := "Bonjour, 你好 — the answer is 42.\nDone"
	ids := tok.Encode(nil, text, false)
	imEnd, _ := tok.TokenID("<|im_end|>")
	var r Request
	if err := Parse(Chat, []byte(`{"stream":true}`), &r); err != nil {
		t.Fatal(err)
	}
	var w Writer
	w.Reset(&r, tok, tok.EOSTokenIDs(), "x", 1, len(ids))
	var out []byte
	for _, id := range append(ids, imEnd) {
		out = w.Feed(out, &grpcworker.Chunk{TokenIDs: []uint32{id}})
	}
	out = w.End(out, "abort")
	var sb strings.Builder
	for _, ev := range strings.Split(strings.TrimSpace(string(out)), "\n\n") {
		p := strings.TrimPrefix(ev, "data: ")
		if p == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta        struct{ Content *string }
				FinishReason *string `json:"finish_reason"`
				MatchedStop  any     `json:"matched_stop"`
			}
		}
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatal(err)
		}
		if ch := c.Choices[0]; ch.Delta.Content != nil {
			sb.WriteString(*ch.Delta.Content)
		} else if ch.FinishReason != nil && (*ch.FinishReason != "stop" || ch.MatchedStop != float64(imEnd)) {
			t.Fatalf("finish %v %v", *ch.FinishReason, ch.MatchedStop)
		}
	}
	if sb.String() != text {
		t.Fatalf("text %q, want %q", sb.String(), text)
	}
}

// Relaying a token allocates nothing once the Writer's buffers have grown.
func TestFeedAllocs(t *testing.T) {
	tok := qwen3(t)
	ids := tok.Encode(nil, strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20), false)
	var r Request
	if err := Parse(Chat, []byte(`{"stream":true,"stop":["zzz"],"model":"qwen"}`), &r); err != nil {
		t.Fatal(err)
	}
	var w Writer
	out := make([]byte, 0, 4096)
	ch := grpcworker.Chunk{TokenIDs: make([]uint32, 1)}
	loop := func() {
		w.Reset(&r, tok, tok.EOSTokenIDs(), "chatcmpl-1", 1, len(ids))
		for _, id := range ids {
			ch.TokenIDs[0] = id
			out = w.Feed(out[:0], &ch)
		}
		out = w.End(out[:0], "stop")
	}
	loop()
	if n := testing.AllocsPerRun(5, loop); n != 0 {
		t.Fatalf("%v allocations per %d-token answer, want 0", n, len(ids))
	}
}
