package extract

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestExtractFields(t *testing.T) {
	tests := []struct {
		name  string
		route Route
		body  string
		want  want
	}{
		{"chat string contents", RouteChat,
			`{"model":"llama","stream":true,"rid":"r1","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"}]}`,
			want{Model: "llama", HasModel: true, Stream: true, Rid: "r1", Text: "You are terse. Hi"}},
		{"chat content parts: text parts only, joined by a space", RouteChat,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"here"}]}]}`,
			want{Text: "look here"}},
		{"chat skips empty pieces and null content", RouteChat,
			`{"messages":[{"role":"user","content":""},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"42"}]}`,
			want{Text: "42"}},
		{"chat assistant reasoning follows its content, whatever the member order", RouteChat,
			`{"messages":[{"reasoning_content":"think","role":"assistant","content":"answer"},{"role":"user","content":"next","reasoning_content":"ignored: not assistant"}]}`,
			want{Text: "answer think next"}},
		{"chat duplicate content: the last wins", RouteChat,
			`{"messages":[{"content":"first","content":"second"},{"content":7,"content":"third"}]}`,
			want{Text: "second third"}},
		{"chat duplicate messages: the last wins", RouteChat,
			`{"messages":[{"content":"old"}],"messages":[{"content":"new"}]}`,
			want{Text: "new"}},
		{"chat lenient role and reasoning types", RouteChat,
			`{"messages":[{"role":{"x":1},"content":"a","reasoning_content":5},{"role":"assistant","reasoning_content":["r"]}]}`,
			want{Text: "a"}},
		{"chat part type matched after decoding", RouteChat,
			`{"messages":[{"content":[{"type":"t\u0065xt","text":"esc"},{"type":"TEXT","text":"not text"}]}]}`,
			want{Text: "esc"}},
		{"chat ignores prompt and input_ids", RouteChat,
			`{"prompt":"p","input_ids":[1],"text":"t"}`,
			want{}},
		{"model null is absent, empty model is present", RouteChat,
			`{"model":null}`, want{}},
		{"empty model", RouteChat, `{"model":""}`, want{HasModel: true}},
		{"stream null is false", RouteChat, `{"stream":null}`, want{}},
		{"rid array: first", RouteGenerate, `{"rid":["a","b"]}`, want{Rid: "a"}},
		{"rid empty array", RouteGenerate, `{"rid":[]}`, want{}},
		{"names decode and match exactly", RouteChat,
			`{"mod\u0065l":"m","Model":"no","STREAM":true,"stream":false}`,
			want{Model: "m", HasModel: true}},
		// Invalid UTF-8 passes through; canonical() replaces it as encoding/json would.
		{"escapes, surrogates and invalid UTF-8 decode as encoding/json does", RouteCompletions,
			"{\"prompt\":\"caf\\u00e9 \\ud83d\\ude00 \\ud83d|\\udc00|\\\"\\\\\\/\\b\\f\\n\\r\\t|\xff|\xe2\x82\xac\"}",
			want{Text: "café 😀 \uFFFD|\uFFFD|\"\\/\b\f\n\r\t|\uFFFD|€"}},
		{"high surrogate followed by a non-surrogate escape", RouteCompletions,
			`{"prompt":"\ud800\u0041"}`, want{Text: "\uFFFDA"}},
		{"completions prompt array of strings joined by a space", RouteCompletions,
			`{"prompt":["a","","b"]}`, want{Text: "a  b"}},
		{"completions token IDs", RouteCompletions,
			`{"prompt":[0, 1 ,4294967295]}`, want{InputIDs: []uint32{0, 1, 4294967295}}},
		{"completions token batch: first", RouteCompletions,
			`{"prompt":[[5,6],[7]]}`, want{InputIDs: []uint32{5, 6}}},
		{"completions empty prompt array", RouteCompletions, `{"prompt":[]}`, want{}},
		{"completions duplicate prompt replaces text by ids", RouteCompletions,
			`{"prompt":"words","prompt":[9]}`, want{InputIDs: []uint32{9}}},
		{"generate text and input_ids both extracted", RouteGenerate,
			`{"text":"hello","input_ids":[1,2,3],"sampling_params":{"max_new_tokens":16,"stop":["\n"]}}`,
			want{Text: "hello", InputIDs: []uint32{1, 2, 3}}},
		{"generate text array: first; input_ids batch: first", RouteGenerate,
			`{"text":["x","y"],"input_ids":[[],[1]]}`, want{Text: "x"}},
		{"generate ignores messages and prompt", RouteGenerate,
			`{"messages":[{"content":"c"}],"prompt":"p"}`, want{}},
		{"whitespace everywhere", RouteChat,
			" \t\r\n{ \"model\" : \"m\" , \"messages\" : [ { \"content\" : [ { \"type\" : \"text\" , \"text\" : \"x\" } ] } ] } \n",
			want{Model: "m", HasModel: true, Text: "x"}},
		{"other values are skipped", RouteChat,
			`{"a":[0,-0,1.5,-1.5e10,1E+2,2e-3,123456789012345678901234567890,true,false,null,"s",{},[],{"b":[{"c":[]}]}],"model":"after"}`,
			want{Model: "after", HasModel: true}},
	}
	var f Fields
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Extract([]byte(tt.body), tt.route, &f); err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if g := got(&f).canonical(); !g.equal(tt.want) {
				t.Errorf("got  %+v\nwant %+v", g, tt.want)
			}
			ref, err := reference([]byte(tt.body), tt.route)
			if err != nil || !ref.equal(tt.want) {
				t.Errorf("the reference disagrees with the table: %+v, %v", ref, err)
			}
		})
	}
}

func TestExtractErrors(t *testing.T) {
	tests := []struct {
		route Route
		body  string
		msg   string
	}{
		{RouteChat, ``, `invalid JSON at byte 0: expected '{' (the request body must be a JSON object), found end of input`},
		{RouteChat, `[1]`, `invalid JSON at byte 0: expected '{' (the request body must be a JSON object), found '['`},
		{RouteChat, `{"model":"m" "stream":true}`, `invalid JSON at byte 13: expected ',' or '}' after the member value, found '"'`},
		{RouteChat, `{"model":"m",}`, `invalid JSON at byte 13: expected '"' to begin a member name, or '}', found '}'`},
		{RouteChat, `{"model" "m"}`, `invalid JSON at byte 9: expected ':' after the member name, found '"'`},
		{RouteChat, `{"model":}`, `invalid JSON at byte 9: expected a JSON value, found '}'`},
		{RouteChat, `{"a":[1,]}`, `invalid JSON at byte 8: expected a JSON value, found ']'`},
		{RouteChat, `{"a":[1 2]}`, `invalid JSON at byte 8: expected ',' or ']' after the array element, found '2'`},
		{RouteChat, `{"a":01}`, `invalid JSON at byte 6: expected ',' or '}' after the member value, found '1'`},
		{RouteChat, `{"a":1.}`, `invalid JSON at byte 7: expected a digit, found '}'`},
		{RouteChat, `{"a":tru}`, `invalid JSON at byte 8: expected true, false or null, found '}'`},
		{RouteChat, `{"a":"\x"}`, `invalid JSON at byte 7: expected an escape character (one of "\/bfnrtu), found 'x'`},
		{RouteChat, `{"a":"\u12G4"}`, `invalid JSON at byte 10: expected a hex digit of a \u escape, found 'G'`},
		{RouteChat, "{\"a\":\"line\nbreak\"}", `invalid JSON at byte 10: control character 0x0a inside a string (escape it, for example as \n or \u000a)`},
		{RouteChat, `{"a":"open`, `invalid JSON at byte 10: unterminated string starting at byte 5`},
		{RouteChat, `{"a":1`, `invalid JSON at byte 6: expected ',' or '}' after the member value, found end of input`},
		{RouteChat, `{"a":1} {}`, `invalid JSON at byte 8: expected end of input after the JSON object, found '{'`},
		{RouteChat, `{"model":5}`, `"model" must be a string`},
		{RouteChat, `{"stream":"yes"}`, `"stream" must be a boolean`},
		{RouteChat, `{"rid":[1]}`, `"rid" must be a string or an array of strings`},
		{RouteChat, `{"messages":{}}`, `"messages" must be an array`},
		{RouteChat, `{"messages":[{"content":"a"},"b"]}`, `"messages[1]" must be an object`},
		{RouteChat, `{"messages":[{"content":1}]}`, `"messages[0].content" must be a string, an array of content parts, or null`},
		{RouteChat, `{"messages":[{"content":[{"type":"text","text":"a"},"b"]}]}`, `"messages[0].content[1]" must be an object`},
		{RouteChat, `{"messages":[{},{"content":[{"type":"text","text":null}]}]}`, `"messages[1].content[0].text" must be a string`},
		{RouteChat, `{"messages":[{"content":[{"type":"text"}]}]}`, `"messages[0].content[0].text" must be a string`},
		{RouteCompletions, `{"prompt":[1,"a"]}`, `"prompt" must be a string, an array of strings, an array of token IDs, or an array of token-ID arrays`},
		{RouteCompletions, `{"prompt":[4294967296]}`, `"prompt" must be a string, an array of strings, an array of token IDs, or an array of token-ID arrays`},
		{RouteCompletions, `{"prompt":[1.0]}`, `"prompt" must be a string, an array of strings, an array of token IDs, or an array of token-ID arrays`},
		{RouteGenerate, `{"input_ids":[-1]}`, `"input_ids" must be an array of token IDs (integers from 0 to 4294967295) or an array of such arrays`},
		{RouteGenerate, `{"input_ids":[[1],2]}`, `"input_ids" must be an array of token IDs (integers from 0 to 4294967295) or an array of such arrays`},
		{RouteGenerate, `{"text":{"a":1}}`, `"text" must be a string or an array of strings`},
		// The first mistyped field by position, whatever the member order of the checks.
		{RouteChat, `{"stream":1,"model":2}`, `"stream" must be a boolean`},
		// A syntax error anywhere wins over a type error before it.
		{RouteChat, `{"model":5,"x":[}`, `invalid JSON at byte 16: expected a JSON value, found '}'`},
		// A later mistyped duplicate overrides an earlier good one.
		{RouteChat, `{"model":"ok","model":true}`, `"model" must be a string`},
	}
	var f Fields
	for _, tt := range tests {
		err := Extract([]byte(tt.body), tt.route, &f)
		if err == nil {
			t.Errorf("%s %q: no error, want %s", tt.route, tt.body, tt.msg)
			continue
		}
		if err.Error() != tt.msg {
			t.Errorf("%s %q:\n got %s\nwant %s", tt.route, tt.body, err, tt.msg)
		}
		var se *SyntaxError
		if errors.As(err, &se) != errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%q: *SyntaxError and ErrInvalidJSON disagree", tt.body)
		}
		var fe *FieldError
		if errors.As(err, &fe) != errors.Is(err, ErrFieldType) {
			t.Errorf("%q: *FieldError and ErrFieldType disagree", tt.body)
		}
		if _, refErr := reference([]byte(tt.body), tt.route); refErr == nil {
			t.Errorf("%q: the reference accepts what the table rejects", tt.body)
		}
	}
}

func TestUnknownRoute(t *testing.T) {
	var f Fields
	for _, r := range []Route{0, RouteMessages + 1} {
		if err := Extract([]byte(`{}`), r, &f); !errors.Is(err, ErrUnknownRoute) {
			t.Errorf("route %d: err = %v, want ErrUnknownRoute", r, err)
		}
		if r.String() != "unknown route" {
			t.Errorf("Route(%d).String() = %q", r, r.String())
		}
	}
}

// TestDepthLimit checks the limit against encoding/json at the boundary, under each kind
// of container the extractor walks itself, and that far deeper input fails cleanly.
func TestDepthLimit(t *testing.T) {
	nest := func(prefix, open, leaf, close, suffix string, levels int) []byte {
		return []byte(prefix + strings.Repeat(open, levels) + leaf + strings.Repeat(close, levels) + suffix)
	}
	cases := []struct {
		name   string
		route  Route
		body   func(levels int) []byte
		inside int // levels the body adds around the nested value
	}{
		{"arrays under a top-level member", RouteChat, func(n int) []byte { return nest(`{"a":`, "[", "1", "]", "}", n) }, 1},
		{"objects under a top-level member", RouteChat, func(n int) []byte { return nest(`{"a":`, `{"b":`, "1", "}", "}", n) }, 1},
		{"arrays under a message", RouteChat, func(n int) []byte { return nest(`{"messages":[{"x":`, "[", "", "]", "}]}", n) }, 3},
		{"arrays under a content part", RouteChat, func(n int) []byte {
			return nest(`{"messages":[{"content":[{"type":"image","x":`, "[", "", "]", "}]}]}", n)
		}, 5},
		{"arrays under a mistyped field", RouteChat, func(n int) []byte { return nest(`{"model":`, "[", "", "]", "}", n) }, 1},
	}
	var f Fields
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			atLimit := c.body(MaxDepth - c.inside)
			over := c.body(MaxDepth - c.inside + 1)
			if _, err := reference(atLimit, c.route); err != nil && c.name != "arrays under a mistyped field" {
				t.Fatalf("encoding/json rejects the body at the limit: %v", err)
			}
			checkAgainstReference(t, atLimit, c.route, &f)
			checkAgainstReference(t, over, c.route, &f)
			err := Extract(over, c.route, &f)
			var se *SyntaxError
			if !errors.As(err, &se) || !strings.Contains(se.Msg, "nesting deeper than 10000 levels") {
				t.Fatalf("over the limit: err = %v, want the nesting error", err)
			}
		})
	}
	deep := nest(`{"a":`, "[", "", "]", "}", 1_000_000)
	if err := Extract(deep, RouteChat, &f); !errors.Is(err, ErrInvalidJSON) {
		t.Fatalf("a million levels: err = %v, want ErrInvalidJSON", err)
	}
}

// TestViews checks which strings alias the body and which are decoded into the Fields'
// buffers, and that appending to an alias cannot overwrite the body.
func TestViews(t *testing.T) {
	body := []byte(`{"model":"plain","rid":"r\u0031","prompt":"p"}`)
	var f Fields
	if err := Extract(body, RouteCompletions, &f); err != nil {
		t.Fatal(err)
	}
	if !aliases(f.Model, body) || !aliases(f.Text, body) {
		t.Errorf("unescaped strings should alias the body")
	}
	if aliases(f.Rid, body) || string(f.Rid) != "r1" {
		t.Errorf("escaped rid %q should be decoded into the Fields", f.Rid)
	}
	_ = append(f.Model, "XXXXXXXX"...)
	if string(body) != `{"model":"plain","rid":"r\u0031","prompt":"p"}` {
		t.Errorf("appending to Model wrote into the body: %s", body)
	}

	// Chat text is always the Fields' own.
	chat := []byte(`{"messages":[{"content":"only"}]}`)
	if err := Extract(chat, RouteChat, &f); err != nil {
		t.Fatal(err)
	}
	if aliases(f.Text, chat) || string(f.Text) != "only" {
		t.Errorf("chat text %q should be built in the Fields", f.Text)
	}
}

// TestInvalidUTF8PassesThrough pins the documented difference from encoding/json:
// invalid UTF-8 is kept as sent, in views and in decoded strings alike.
func TestInvalidUTF8PassesThrough(t *testing.T) {
	body := []byte("{\"model\":\"m\xff\",\"rid\":\"r\\n\xc3\",\"prompt\":\"\xe2\x82 \u00e9\"}")
	var f Fields
	if err := Extract(body, RouteCompletions, &f); err != nil {
		t.Fatal(err)
	}
	if string(f.Model) != "m\xff" || !aliases(f.Model, body) {
		t.Errorf("Model = %q, want the raw view %q", f.Model, "m\xff")
	}
	if string(f.Rid) != "r\n\xc3" || string(f.Text) != "\xe2\x82 é" {
		t.Errorf("Rid = %q, Text = %q: escapes decoded, invalid bytes kept", f.Rid, f.Text)
	}
	ref, err := reference(body, RouteCompletions)
	if err != nil || !got(&f).canonical().equal(ref) {
		t.Errorf("canonical form %+v differs from encoding/json's %+v (%v)", got(&f).canonical(), ref, err)
	}
}

func aliases(s, body []byte) bool {
	if len(s) == 0 {
		return false
	}
	p, b := uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	return p >= b && p < b+uintptr(len(body))
}

// TestReuse extracts different bodies with one Fields, as the gateway's pool does, and
// checks that nothing of a request leaks into the next.
func TestReuse(t *testing.T) {
	bodies := []struct {
		route Route
		body  string
	}{
		{RouteGenerate, `{"model":"a","stream":true,"rid":["x\u0041"],"text":"t","input_ids":[[1,2,3]]}`},
		{RouteChat, `{"messages":[{"content":"c\u00e9"}]}`},
		{RouteCompletions, `{"prompt":["p","q"],"model":"m\n"}`},
		{RouteGenerate, `{}`},
		{RouteChat, `{"model":1}`},
		{RouteCompletions, `{"prompt":[7]}`},
	}
	var f Fields
	for i := 0; i < 3; i++ {
		for _, b := range bodies {
			checkAgainstReference(t, []byte(b.body), b.route, &f)
		}
	}
	f.Reset()
	if got(&f).equal(want{}) == false || f.Model != nil || f.Text != nil || f.Rid != nil {
		t.Errorf("Reset left %+v", got(&f))
	}
}

func TestRealisticBodies(t *testing.T) {
	var f Fields
	for _, c := range realistic(t) {
		checkAgainstReference(t, c.body, c.route, &f)
		if len(f.Text) == 0 && len(f.InputIDs) == 0 {
			t.Errorf("%s: no routing text or token IDs", c.name)
		}
	}
}

type realisticBody struct {
	name  string
	route Route
	body  []byte
}

func realistic(tb testing.TB) []realisticBody {
	tb.Helper()
	var out []realisticBody
	for _, c := range []struct {
		name  string
		route Route
	}{
		{"chat_4k", RouteChat},            // system + user message, 3.9 KB
		{"chat_multiturn", RouteChat},     // 26 messages, content parts, a tool, 14.8 KB
		{"completions", RouteCompletions}, // a 0.7 KB prompt
		{"generate_ids", RouteGenerate},   // 400 input_ids, 3.1 KB
	} {
		b, err := os.ReadFile("testdata/" + c.name + ".json")
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, realisticBody{c.name, c.route, b})
	}
	return out
}
