package loadgen

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

func TestParsePayload(t *testing.T) {
	cases := []struct {
		name string
		ep   Endpoint
		in   string
		text string
		use  usage
		fail bool
	}{
		{"chat role chunk", EndpointChat, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, "", usage{}, false},
		{"chat content chunk", EndpointChat, `{"choices":[{"delta":{"content":"he\"llo\u00e9"}}],"usage":null}`, "he\"lloé", usage{}, false},
		{"chat usage chunk", EndpointChat, `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}`, "", usage{true, 10, 3, 8}, false},
		{"chat usage without details", EndpointChat, `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3}}`, "", usage{true, 10, 3, 0}, false},
		{"chat whole", EndpointChat, `{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`, "ok", usage{true, 1, 1, 0}, false},
		{"completions", EndpointCompletions, `{"object":"text_completion","choices":[{"text":"abc"}]}`, "abc", usage{}, false},
		{"generate", EndpointGenerate, `{"text":"a b","meta_info":{"prompt_tokens":5,"completion_tokens":2,"cached_tokens":4}}`, "a b", usage{true, 5, 2, 4}, false},
		{"error object", EndpointChat, `{"error":{"message":"overloaded","code":503}}`, "", usage{}, true},
		{"null error is no error", EndpointChat, `{"error":null,"choices":[{"delta":{"content":"x"}}]}`, "x", usage{}, false},
		{"wrong types ignored", EndpointChat, `{"choices":[{"delta":{"content":5}}],"usage":"many"}`, "", usage{}, false},
	}
	var p fastjson.Parser
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parsePayload(&p, c.ep, []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got.text) != c.text || got.usage != c.use || got.failed != c.fail {
				t.Fatalf("got text %q usage %+v failed %v; want %q %+v %v", got.text, got.usage, got.failed, c.text, c.use, c.fail)
			}
		})
	}
	if _, err := parsePayload(&p, EndpointChat, []byte(`{"choices":`)); err == nil {
		t.Fatal("truncated JSON parsed without error")
	}
}

// FuzzParsePayload checks the payload parser never panics and agrees with encoding/json on
// the generated text of chat chunks.
func FuzzParsePayload(f *testing.F) {
	f.Add(`{"choices":[{"delta":{"content":"hi"}}]}`)
	f.Add(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}`)
	f.Add(`{"text":"x","meta_info":{"prompt_tokens":1}}`)
	f.Add(`{"error":{"message":"x"}}`)
	f.Add(`[1,2,{"a":"\ud800"}]`)
	var p fastjson.Parser
	f.Fuzz(func(t *testing.T, in string) {
		for _, ep := range []Endpoint{EndpointChat, EndpointCompletions, EndpointGenerate} {
			got, err := parsePayload(&p, ep, []byte(in))
			if err != nil || ep != EndpointChat || got.failed {
				continue
			}
			var ref struct {
				Choices []struct {
					Delta struct {
						Content *string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(in), &ref) != nil || len(ref.Choices) == 0 || ref.Choices[0].Delta.Content == nil {
				continue
			}
			// encoding/json turns invalid UTF-8 and lone surrogates into U+FFFD; fastjson keeps
			// them. Compare only where both are well defined.
			if strings.Contains(in, `\ud`) || strings.Contains(in, `\uD`) || !utf8.ValidString(in) {
				continue
			}
			if want := *ref.Choices[0].Delta.Content; want != string(got.text) {
				t.Fatalf("content %q, encoding/json says %q", got.text, want)
			}
		}
	})
}
