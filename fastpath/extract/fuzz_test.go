package extract

import (
	"errors"
	"strings"
	"testing"
)

// fuzzSeeds cover each route's shapes, every escape, unicode and invalid UTF-8, numbers in
// every form, duplicates, nesting, and the syntax errors near each of them.
var fuzzSeeds = []string{
	`{}`,
	` {"model":"m"} `,
	`{"model":"llama","messages":[{"role":"user","content":"hi"}],"stream":true}`,
	`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}},{"type":"text","text":"b"}]}]}`,
	`{"messages":[{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","content":"42"}]}`,
	`{"messages":[{"reasoning_content":"r","role":"assistant","content":"c"}]}`,
	`{"messages":[{"content":"a","content":"b"},{"content":5,"content":"c"}]}`,
	`{"messages":[{"content":[{"text":"late","type":"text"}]}]}`,
	`{"messages":[{"content":[{"type":"text"}]}]}`,
	`{"messages":[{"content":[{"type":"t\u0065xt","text":"esc"}]}]}`,
	`{"messages":[1]}`,
	`{"messages":{}}`,
	`{"messages":[],"messages":null}`,
	`{"model":5,"model":"ok"}`,
	`{"model":"ok","model":5}`,
	`{"mod\u0065l":"escaped name","stream":null,"rid":["a","b"]}`,
	`{"model":"caf\u00e9 \ud83d\ude00 \ud83d \ude00 \udc00\u0041 \"q\" \\ \/ \b\f\n\r\t","rid":"r\u0000"}`,
	"{\"model\":\"bad \xff utf8 \xc3\x28 \xed\xa0\x80 ok \xe2\x82\xac\"}",
	"{\"model\":\"ctl \x01\"}",
	`{"prompt":"once upon a time"}`,
	`{"prompt":["a","","b"]}`,
	`{"prompt":[1,2,3,4294967295]}`,
	`{"prompt":[4294967296]}`,
	`{"prompt":[[1,2],[3]]}`,
	`{"prompt":[[],[1]]}`,
	`{"prompt":[1,"a"]}`,
	`{"prompt":[1.0]}`,
	`{"prompt":[1e2,-0]}`,
	`{"prompt":[]}`,
	`{"text":"hello","input_ids":[1,2],"sampling_params":{"max_new_tokens":8}}`,
	`{"text":["x","y"],"input_ids":[[5],[6,7]]}`,
	`{"input_ids":[[5],6]}`,
	`{"input_ids":[-1]}`,
	`{"a":[0,-0,1.5,-1.5e10,1E+2,2e-3,123456789012345678901234567890,true,false,null,"s",{},[]]}`,
	`{"a":01}`,
	`{"a":1.}`,
	`{"a":.5}`,
	`{"a":-}`,
	`{"a":1e}`,
	`{"a":tru}`,
	`{"a":nul}`,
	`{"a":"\x"}`,
	`{"a":"\u12"}`,
	`{"a":1,}`,
	`{"a":[1,]}`,
	`{"a" 1}`,
	`{"a":1}}`,
	`{"a":1} x`,
	`{"a":1`,
	`{"a":"unterminated`,
	`[1,2]`,
	`"str"`,
	``,
	`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, 100) + `1` + strings.Repeat("}", 100) + `}`,
	// The pass-through routes: embeddings, classify and tokenize prompts, rerank queries,
	// detokenize tokens, Responses input and Anthropic messages with their system.
	`{"model":"e","input":["a","b"],"encoding_format":"float"}`,
	`{"input":[[1,2],[3]]}`,
	`{"input":5}`,
	`{"query":"what is x","documents":["x is 1","y"],"top_n":1}`,
	`{"query":["no"]}`,
	`{"tokens":[1,2,3]}`,
	`{"tokens":"x"}`,
	`{"input":"hello","instructions":"be brief","stream":true}`,
	`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},{"type":"function_call_output","call_id":"c","output":"42"}]}`,
	`{"input":[{"content":[{"type":"input_text"}]}]}`,
	`{"input":["str"]}`,
	`{"messages":[{"role":"user","content":"hi"}],"system":"sys","max_tokens":8}`,
	`{"system":[{"type":"text","text":"s1"},{"type":"text","text":"","cache_control":{"type":"ephemeral"}},{"type":"text","text":"s2"}],"messages":[{"role":"user","content":[{"type":"text","text":"q"},{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
	`{"system":"only"}`,
	`{"system":[{"type":"text"}]}`,
	`{"system":5,"system":"later"}`,
	`{"system":[1]}`,
}

func FuzzExtract(f *testing.F) {
	for _, s := range fuzzSeeds {
		for r := RouteChat; r < numRoutes; r++ {
			f.Add([]byte(s), uint8(r))
		}
	}
	for _, c := range realistic(f) {
		f.Add(c.body, uint8(c.route))
	}
	var fields Fields
	f.Fuzz(func(t *testing.T, body []byte, r uint8) {
		route := Route(r%uint8(numRoutes-1) + 1)
		checkAgainstReference(t, body, route, &fields)
	})
}

// checkAgainstReference runs Extract and the encoding/json reference on body and fails t
// unless they agree on acceptance and, when both accept, on every field. It also checks
// that Extract never writes into the body and that errors are of the documented types.
func checkAgainstReference(t *testing.T, body []byte, route Route, f *Fields) {
	t.Helper()
	orig := string(body)
	err := Extract(body, route, f)
	if string(body) != orig {
		t.Fatalf("Extract modified the body")
	}
	ref, refErr := reference(body, route)
	switch {
	case err == nil && refErr != nil:
		t.Fatalf("%s: Extract accepted what encoding/json rejects (%v):\n%q", route, refErr, body)
	case err != nil && refErr == nil:
		t.Fatalf("%s: Extract rejected what encoding/json accepts: %v\n%q", route, err, body)
	case err != nil:
		var se *SyntaxError
		var fe *FieldError
		if !errors.As(err, &se) && !errors.As(err, &fe) {
			t.Fatalf("error %v is neither *SyntaxError nor *FieldError", err)
		}
		if se != nil && !errors.Is(err, ErrInvalidJSON) || fe != nil && !errors.Is(err, ErrFieldType) {
			t.Fatalf("error %v does not wrap its sentinel", err)
		}
		if se != nil && (se.Offset < 0 || se.Offset > len(body)) || fe != nil && (fe.Offset < 0 || fe.Offset > len(body)) {
			t.Fatalf("error %v has an offset outside the body (len %d)", err, len(body))
		}
		return
	}
	if g := got(f).canonical(); !g.equal(ref) {
		t.Fatalf("%s: fields differ for\n%q\n got %+v\nwant %+v", route, body, g, ref)
	}
}
