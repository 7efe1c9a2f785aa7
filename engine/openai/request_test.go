package openai

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
)

func TestParseChatSampling(t *testing.T) {
	var r Request
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},
		"n":2,"stop":["a","","b"],"stop_token_ids":[7,8],"max_tokens":5,"max_completion_tokens":9,"temperature":0,
		"top_p":0.5,"top_k":20,"min_p":0.1,"frequency_penalty":0.5,"presence_penalty":-0.5,"repetition_penalty":1.1,
		"seed":42,"ignore_eos":true,"skip_special_tokens":false,"no_stop_trim":true,"min_tokens":2,"rid":"r1",
		"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`
	if err := Parse(Chat, []byte(body), &r); err != nil {
		t.Fatal(err)
	}
	want := grpcworker.Sampling{
		Temperature: grpcworker.Some[float32](0), TopP: grpcworker.Some[float32](0.5), TopK: grpcworker.Some[int32](20),
		MinP: grpcworker.Some[float32](0.1), FrequencyPenalty: grpcworker.Some[float32](0.5), PresencePenalty: grpcworker.Some[float32](-0.5),
		RepetitionPenalty: grpcworker.Some[float32](1.1), MaxNewTokens: grpcworker.Some[uint32](9), MinNewTokens: 2,
		Seed: grpcworker.Some[int32](42), Stop: []string{"a", "b"}, StopTokenIDs: []uint32{7, 8}, IgnoreEOS: true, N: 2,
		Constraint: grpcworker.JSONSchema, ConstraintValue: `{"type":"object"}`,
	}
	if !reflect.DeepEqual(r.Sampling, want) {
		t.Fatalf("sampling\n got %+v\nwant %+v", r.Sampling, want)
	}
	if r.Model != "m" || r.Rid != "r1" || !r.Stream || !r.IncludeUsage || r.N != 2 || r.SkipSpecialTokens || !r.NoStopTrim {
		t.Fatalf("request %+v", r)
	}
	opts := r.StopOptions([]uint32{99})
	if !opts.KeepSpecialTokens || !opts.NoStopTrim || !opts.IgnoreEOS || opts.EOSTokenIDs[0] != 99 || len(opts.Stop) != 2 {
		t.Fatalf("stop options %+v", opts)
	}
}

func TestParseDefaults(t *testing.T) {
	var r Request
	if err := Parse(Chat, []byte(`{"messages":[]}`), &r); err != nil {
		t.Fatal(err)
	}
	// Nothing set: every field is the engine's default, chat runs to the context length.
	if !reflect.DeepEqual(r.Sampling, grpcworker.Sampling{N: 1}) || !r.SkipSpecialTokens || r.N != 1 {
		t.Fatalf("chat defaults %+v", r)
	}
	if err := Parse(Completion, []byte(`{"prompt":"hi","stop":"x"}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Sampling.MaxNewTokens != grpcworker.Some[uint32](DefaultCompletionMaxTokens) || !r.TextSet || r.Text != "hi" || !reflect.DeepEqual(r.Sampling.Stop, []string{"x"}) {
		t.Fatalf("completion defaults %+v", r)
	}
	if err := Parse(Generate, []byte(`{"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":4,"temperature":0.5,"stop":"z","regex":"a+"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.InputIDs, []uint32{1, 2, 3}) || r.TextSet || r.Sampling.MaxNewTokens.Value != 4 || r.Sampling.Temperature.Value != 0.5 ||
		r.Sampling.Constraint != grpcworker.Regex || r.Sampling.ConstraintValue != "a+" || r.Sampling.Stop[0] != "z" {
		t.Fatalf("generate %+v", r)
	}
}

func TestParsePrompts(t *testing.T) {
	var r Request
	for body, want := range map[string][]uint32{
		`{"prompt":[5,6]}`:   {5, 6},
		`{"prompt":[[5,6]]}`: {5, 6},
	} {
		if err := Parse(Completion, []byte(body), &r); err != nil || r.TextSet || !reflect.DeepEqual(r.InputIDs, want) {
			t.Fatalf("%s: %v %+v", body, err, r)
		}
	}
	if err := Parse(Completion, []byte(`{"prompt":["only"]}`), &r); err != nil || r.Text != "only" {
		t.Fatalf("one-string list: %v %+v", err, r)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		kind  Kind
		body  string
		param string
	}{
		{Chat, `[1]`, ""},
		{Chat, `{"n":0}`, "n"},
		{Chat, `{"n":100000}`, "n"},
		{Chat, `{"max_tokens":0}`, "max_tokens"},
		{Chat, `{"temperature":-1}`, "temperature"},
		{Chat, `{"top_p":0}`, "top_p"},
		{Chat, `{"top_k":0}`, "top_k"},
		{Chat, `{"min_p":2}`, "min_p"},
		{Chat, `{"presence_penalty":3}`, "presence_penalty"},
		{Chat, `{"repetition_penalty":0}`, "repetition_penalty"},
		{Chat, `{"seed":1e12}`, ""},
		{Chat, `{"seed":10000000000}`, "seed"},
		{Chat, `{"stop":5}`, "stop"},
		{Chat, `{"stop_token_ids":[-1]}`, "stop_token_ids"},
		{Chat, `{"response_format":{"type":"json_schema"}}`, "response_format"},
		{Chat, `{"response_format":{"type":"yaml"}}`, "response_format"},
		{Chat, `{"regex":"a","ebnf":"b"}`, "ebnf"},
		{Chat, `{"rid":["a","b"]}`, "rid"},
		{Completion, `{}`, "prompt"},
		{Completion, `{"prompt":["a","b"]}`, "prompt"},
		{Completion, `{"prompt":[-3]}`, "prompt"},
		{Completion, `{"prompt":"x","echo":true}`, "echo"},
		{Generate, `{}`, "text"},
		{Generate, `{"text":"a","input_ids":[1]}`, "text"},
		{Generate, `{"input_ids":[]}`, "input_ids"},
		{Generate, `{"text":"a","sampling_params":{"max_new_tokens":-1}}`, "sampling_params.max_new_tokens"},
	}
	var r Request
	for _, c := range cases {
		err := Parse(c.kind, []byte(c.body), &r)
		var e *Error
		if !errors.As(err, &e) || e.Param != c.param || e.Msg == "" {
			t.Errorf("%s: err %v, want an *Error with param %q", c.body, err, c.param)
		}
	}
}

func TestPromptChatAndLimits(t *testing.T) {
	tok := qwen3(t)
	var r Request
	body := []byte(`{"model":"q","messages":[{"role":"user","content":"Hello there"}]}`)
	if err := Parse(Chat, body, &r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Prompt(tok, nil, body, 0, nil, nil); err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Fatalf("no template: %v", err)
	}
	if err := Parse(Completion, []byte(`{"prompt":"Hello there, world"}`), &r); err != nil {
		t.Fatal(err)
	}
	ids, _, err := r.Prompt(tok, nil, nil, 0, nil, nil)
	if err != nil || !reflect.DeepEqual(ids, tok.Encode(nil, "Hello there, world", true)) {
		t.Fatalf("text prompt: %v %v", ids, err)
	}
	var e *Error
	if _, _, err := r.Prompt(tok, nil, nil, 2, nil, nil); !errors.As(err, &e) || !strings.Contains(e.Msg, "at most 2") {
		t.Fatalf("too long: %v", err)
	}
	if err := Parse(Generate, []byte(`{"input_ids":[1,4000000000]}`), &r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Prompt(tok, nil, nil, 0, nil, nil); !errors.As(err, &e) || e.Param != "input_ids" {
		t.Fatalf("id outside the vocabulary: %v", err)
	}
}

func TestFill(t *testing.T) {
	var r Request
	if err := Parse(Chat, []byte(`{"max_tokens":3,"stop":"x"}`), &r); err != nil {
		t.Fatal(err)
	}
	var g grpcworker.GenerateRequest
	r.Fill(&g, "rid", []uint32{1, 2}, 3)
	if g.RequestID != "rid" || !g.Stream || g.DataParallelRank != grpcworker.Some[int32](3) || g.Sampling.MaxNewTokens.Value != 3 || len(g.InputIDs) != 2 {
		t.Fatalf("%+v", g)
	}
	r.Fill(&g, "rid", []uint32{1}, -1)
	if g.DataParallelRank.Set {
		t.Fatal("rank -1 must leave data_parallel_rank unset")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2,"stop":["a"],"max_tokens":5}`,
		`{"prompt":[[1,2]],"stop":"x","response_format":{"type":"json_object"}}`,
		`{"text":"hi","sampling_params":{"max_new_tokens":3,"json_schema":"{}"}}`,
		`{"input_ids":[1],"stream":true}`, `{"prompt":null}`, `[]`, `{"n":1e400}`,
	} {
		f.Add(uint8(0), []byte(s))
		f.Add(uint8(1), []byte(s))
		f.Add(uint8(2), []byte(s))
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		var r Request
		err := Parse(Kind(k%3), body, &r)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Msg == "" {
				t.Fatalf("error %v is not an *Error with a message", err)
			}
			return
		}
		if r.N < 1 || r.N > grpcworker.MaxSamples || int(r.Sampling.N) != r.N {
			t.Fatalf("n %d / %d", r.N, r.Sampling.N)
		}
		if r.Kind != Chat && !r.TextSet && len(r.InputIDs) == 0 {
			t.Fatal("a prompt route accepted a request without a prompt")
		}
		for _, s := range r.Sampling.Stop {
			if s == "" {
				t.Fatal("an empty stop string was kept")
			}
		}
	})
}
