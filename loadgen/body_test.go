package loadgen

import (
	"encoding/json"
	"testing"
)

// decodedBody is every field a request body can carry.
type decodedBody struct {
	Model    *string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Prompt        *string `json:"prompt"`
	Text          *string `json:"text"`
	MaxTokens     int     `json:"max_tokens"`
	Stream        bool    `json:"stream"`
	IgnoreEOS     bool    `json:"ignore_eos"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	SamplingParams *struct {
		MaxNewTokens int  `json:"max_new_tokens"`
		IgnoreEOS    bool `json:"ignore_eos"`
	} `json:"sampling_params"`
}

func decodeBody(t testing.TB, body []byte) decodedBody {
	t.Helper()
	var d decodedBody
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	return d
}

func TestBodyShapes(t *testing.T) {
	msgs := []message{{"system", "be \"brief\"\n"}, {"user", "hi\tthere"}}
	chat := decodeBody(t, bodyBuilder{endpoint: EndpointChat, model: "m/1", stream: true, ignoreEOS: true}.build(msgs, 7))
	if *chat.Model != "m/1" || len(chat.Messages) != 2 || chat.Messages[0].Content != msgs[0].content || chat.Messages[1].Role != "user" ||
		chat.MaxTokens != 7 || !chat.Stream || !chat.IgnoreEOS || chat.StreamOptions == nil || !chat.StreamOptions.IncludeUsage {
		t.Fatalf("chat body %+v", chat)
	}
	comp := decodeBody(t, bodyBuilder{endpoint: EndpointCompletions, model: "m"}.build(msgs, 3))
	if comp.Prompt == nil || *comp.Prompt != msgs[0].content+"\n"+msgs[1].content || comp.Stream || comp.IgnoreEOS || comp.StreamOptions != nil || comp.MaxTokens != 3 {
		t.Fatalf("completions body %+v", comp)
	}
	gen := decodeBody(t, bodyBuilder{endpoint: EndpointGenerate, model: "m", stream: true, ignoreEOS: true}.build(msgs, 5))
	if gen.Text == nil || gen.Model != nil || gen.SamplingParams == nil || gen.SamplingParams.MaxNewTokens != 5 || !gen.SamplingParams.IgnoreEOS || !gen.Stream || gen.StreamOptions != nil {
		t.Fatalf("generate body %+v", gen)
	}
}
