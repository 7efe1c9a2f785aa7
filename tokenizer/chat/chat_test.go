package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

func mustDecode(t *testing.T, s string) jinja.Value {
	t.Helper()
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("DecodeJSON(%q): %v", s, err)
	}
	return v
}

func TestDecodeJSONKeepsOrderAndTypes(t *testing.T) {
	v := mustDecode(t, `{"z": 1, "a": {"y": [1, 2.0, -0, 1e2, 9223372036854775808], "b": null}, "m": true, "z": "last"}`)
	if got := string(appendPyRepr(nil, v)); got != `{'z': 'last', 'a': {'y': [1, 2.0, 0, 100.0, 9.223372036854776e+18], 'b': None}, 'm': True}` {
		t.Fatalf("repr = %s", got)
	}
	s := mustDecode(t, `"tab\t nl\n quote\" slash\/ u\u00e9 pair\ud83d\ude80 lone\ud800 end"`)
	if got, want := s.AsString(), "tab\t nl\n quote\" slash/ ué pair🚀 lone\uFFFD end"; got != want {
		t.Fatalf("string = %q, want %q", got, want)
	}
}

func TestDecodeJSONRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		``, `{`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `01`, `1.`, `1e`, `-`, `"abc`, "\"a\x01\"",
		`"\x"`, `"\u12"`, `tru`, `nul`, `{} x`, `[1] [2]`, strings.Repeat("[", 300) + strings.Repeat("]", 300),
	} {
		if _, err := DecodeJSON([]byte(in)); err == nil {
			t.Errorf("DecodeJSON(%q) accepted malformed input", in)
		}
	}
}

func TestPyFloatMatchesPythonRepr(t *testing.T) {
	tenth := 0.1
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {0.1, "0.1"}, {1e-4, "0.0001"},
		{1e-5, "1e-05"}, {2.5e-7, "2.5e-07"}, {123456789012345.6, "123456789012345.6"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e16, "1.5e+16"}, {1e22, "1e+22"},
		{1e300, "1e+300"}, {5e-324, "5e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{-3.25, "-3.25"}, {100, "100.0"}, {tenth + 2*tenth, "0.30000000000000004"},
	}
	for _, c := range cases {
		if got := string(appendPyFloat(nil, c.f, false)); got != c.want {
			t.Errorf("repr(%v) = %s, want %s", c.f, got, c.want)
		}
	}
	if got := string(appendPyFloat(nil, math.Inf(-1), true)); got != "-Infinity" {
		t.Errorf("json -inf = %s", got)
	}
	if got := string(appendPyFloat(nil, math.NaN(), false)); got != "nan" {
		t.Errorf("repr nan = %s", got)
	}
}

func TestPyQuotedMatchesPythonRepr(t *testing.T) {
	cases := map[string]string{
		`plain`:              `'plain'`,
		`it's`:               `"it's"`,
		`both ' and "`:       `'both \' and "'`,
		"ctl\x01\x7f\t":      `'ctl\x01\x7f\t'`,
		"back\\slash\n":      `'back\\slash\n'`,
		"é 日本 🚀":             `'é 日本 🚀'`,
		"nbsp\u00a0zw\u200b": `'nbsp\xa0zw\u200b'`,
	}
	for in, want := range cases {
		if got := string(appendPyQuoted(nil, in)); got != want {
			t.Errorf("repr(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestTojsonMatchesJSONDumps(t *testing.T) {
	v := mustDecode(t, `{"b": [1, 2.5, {"z": null}], "a": "é<&>\u2028\"\\\b\f\u0001", "c": {}, "d": []}`)
	call := func(kw map[string]jinja.Value, pos ...jinja.Value) string {
		t.Helper()
		out, err := filterTojson(append([]jinja.Value{v}, pos...), kw)
		if err != nil {
			t.Fatal(err)
		}
		return out.AsString()
	}
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"default", call(nil), `{"b": [1, 2.5, {"z": null}], "a": "é<&>` + "\u2028" + `\"\\\b\f\u0001", "c": {}, "d": []}`},
		{"ensure_ascii", call(map[string]jinja.Value{"ensure_ascii": jinja.NewBool(true)}), `{"b": [1, 2.5, {"z": null}], "a": "\u00e9<&>\u2028\"\\\b\f\u0001", "c": {}, "d": []}`},
		{"indent", call(map[string]jinja.Value{"indent": jinja.NewInt(1)}), "{\n \"b\": [\n  1,\n  2.5,\n  {\n   \"z\": null\n  }\n ],\n \"a\": \"é<&>\u2028\\\"\\\\\\b\\f\\u0001\",\n \"c\": {},\n \"d\": []\n}"},
		{"sort_keys", call(map[string]jinja.Value{"sort_keys": jinja.NewBool(true), "separators": jinja.NewList([]jinja.Value{jinja.NewString(","), jinja.NewString(":")})}), `{"a":"é<&>` + "\u2028" + `\"\\\b\f\u0001","b":[1,2.5,{"z":null}],"c":{},"d":[]}`},
		{"positional indent", call(nil, jinja.NewBool(false), jinja.NewString("\t")), "{\n\t\"b\": [\n\t\t1,\n\t\t2.5,\n\t\t{\n\t\t\t\"z\": null\n\t\t}\n\t],\n\t\"a\": \"é<&>\u2028\\\"\\\\\\b\\f\\u0001\",\n\t\"c\": {},\n\t\"d\": []\n}"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, c.got, c.want)
		}
	}
	if _, err := filterTojson([]jinja.Value{jinja.Undefined()}, nil); err == nil {
		t.Error("tojson(undefined) succeeded; json.dumps raises TypeError")
	}
}

func TestRewriteSource(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a\r\nb\rc\n", "{{ 'a\nb\nc' }}"},
		{"it's \\ {{ x }}", "{{ 'it\\'s \\\\ ' }}{{ ( x ) | __smg_str }}"},
		{"a  {{- x -}}  b", "{{ 'a' }}{{ ( x ) | __smg_str }}{{ 'b' }}"},
		{"{{ 'lit' }}{{ 'a' + x }}{{ x ~ y }}{{ t | tojson }}", "{{ 'lit' }}{{ 'a' + x }}{{ (x) | __smg_str ~ (y) | __smg_str }}{{ t | __smg_tojson }}"},
		{"{% set c = 'a~' ~ x.y[0] ~ f(a ~ b, k=1 ~ 2) if c == d ~ e else [p ~ q] %}", "{% set c = ('a~') | __smg_str ~ (x.y[0]) | __smg_str ~ (f((a) | __smg_str ~ (b) | __smg_str, k=(1) | __smg_str ~ (2) | __smg_str)) | __smg_str if c == (d) | __smg_str ~ (e) | __smg_str else [(p) | __smg_str ~ (q) | __smg_str] %}"},
		{"{{ not a ~ b | string }}", "{{ ( not (a) | __smg_str ~ (b | __smg_str) | __smg_str ) | __smg_str }}"},
		{"{{ x|tojson(indent=2) }}", "{{ x|__smg_tojson(indent=2) }}"},
		{"{{ '| tojson' }}", "{{ '| tojson' }}"},
		{"{% set y = x | tojson %}{% set z = x | tojsonx %}", "{% set y = x | __smg_tojson %}{% set z = x | tojsonx %}"},
		{"{% raw %}{{ x | tojson }}{% endraw %}{{ x }}", "{{ '{{ x | tojson }}' }}{{ ( x ) | __smg_str }}"},
		{"a{# {{ x | tojson }} #}b", "{{ 'a' }}{{ 'b' }}"},
		{"{% if x %}\n  y\n  {% endif %}\n", "{% if x %}{#\n#}{{ '  y\n' }}{% endif %}"},
		{"a {#\n\n#} {%- if x -%}\n b", "{{ 'a ' }}{#\n\n#}{% if x %}{#\n#}{{ 'b' }}"},
		{"{%+ if x +%}\nz", "{% if x %}{{ '\nz' }}"},
		{"{{ '}}' }}", "{{ '}}' }}"},
		{"{{ \"a\\x41\\n\" }}", "{{ 'aA\n' }}"},
		{"{{ }}", "{{ }}"},
		{"a {{ x", "{{ 'a ' }}{{ x"},
	}
	for _, c := range cases {
		if got := rewriteSource(c.in); got != c.want {
			t.Errorf("rewriteSource(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPrintsString(t *testing.T) {
	yes := []string{`'a'`, `"a" + x`, `x + 'a'`, `'<' + m.role + '\n' + m.content`, `a ~ b`, `x | __smg_tojson`, `x | __smg_tojson(indent=2)`, `'a' + (x if c else y)`, `'a' + f(1, 2)`}
	no := []string{`x`, `x + y`, `'a'.split()`, `'abc'[0]`, `'a' if c else none`, `'a' == x`, `'a' in x`, `x - 'a'`, `x | length`, `x | __smg_tojsonx`, `('a')`, `x is string`, `not 'a'`}
	for _, e := range yes {
		if !printsString(e) {
			t.Errorf("printsString(%q) = false, want true", e)
		}
	}
	for _, e := range no {
		if printsString(e) {
			t.Errorf("printsString(%q) = true, want false", e)
		}
	}
}

func TestErrorsAreTemplateErrors(t *testing.T) {
	asTE := func(t *testing.T, err error) *TemplateError {
		t.Helper()
		var te *TemplateError
		if !errors.As(err, &te) {
			t.Fatalf("error %v (%T) is not a *TemplateError", err, err)
		}
		return te
	}
	_, err := Compile("{% if x %}unclosed")
	if te := asTE(t, err); te.Phase != PhaseCompile || !strings.Contains(te.Error(), "does not compile") {
		t.Errorf("compile error = %+v", te)
	}
	// Line numbers survive the source rewrite.
	_, err = Compile("{#- a\ncomment -#}\n{%- if x -%}\n  \n{{ 1 +* }}\n{% endif %}")
	if te := asTE(t, err); !strings.Contains(te.Msg, "line 5") {
		t.Errorf("compile error %q does not name line 5", te.Msg)
	}

	tmpl, err := Compile("{% if messages[0].role != 'user' %}{{ raise_exception('Only user messages: got ' ~ messages[0].role) }}{% endif %}ok")
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest([]byte(`{"messages": [{"role": "system", "content": "x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render([]byte("keep"), req)
	te := asTE(t, err)
	if !te.Raised || te.Msg != "Only user messages: got system" || te.Phase != PhaseRender {
		t.Errorf("raise_exception error = %+v", te)
	}
	if string(out) != "keep" {
		t.Errorf("failed Render returned %q, want dst unchanged", out)
	}

	for _, body := range []string{
		`not json`, `[]`, `{}`, `{"messages": "hi"}`, `{"messages": [1]}`,
		`{"messages": [], "chat_template_kwargs": [1]}`, `{"messages": [], "add_generation_prompt": "yes"}`,
	} {
		_, err := DecodeRequest([]byte(body))
		if te := asTE(t, err); te.Phase != PhaseInput {
			t.Errorf("DecodeRequest(%s) phase %s", body, te.Phase)
		}
	}
	if _, err := tmpl.Render(nil, nil); asTE(t, err).Phase != PhaseInput {
		t.Error("Render(nil) is not an input error")
	}
	if _, err := tmpl.Render(nil, &Request{Messages: jinja.NewList([]jinja.Value{jinja.NewInt(1)})}); asTE(t, err).Phase != PhaseInput {
		t.Error("Render with a non-object message is not an input error")
	}

	qwen := loadTemplate(t, "qwen3")
	req, err = DecodeRequest([]byte(`{"messages": [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{bad"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = qwen.Render(nil, req)
	if te := asTE(t, err); te.Phase != PhaseInput || !strings.Contains(te.Msg, "arguments is not valid JSON") {
		t.Errorf("bad arguments error = %+v", te)
	}
}

func TestRenderLeavesRequestUnchanged(t *testing.T) {
	qwen := loadTemplate(t, "qwen3")
	body := `{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "b"}]},
	  {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}]}`
	req, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	before := string(appendPyRepr(nil, req.Messages))
	first, err := qwen.Render(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	second, err := qwen.Render(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(second) {
		t.Errorf("renders differ:\n%q\n%q", first, second)
	}
	if after := string(appendPyRepr(nil, req.Messages)); after != before {
		t.Errorf("request changed:\n%s\n%s", before, after)
	}
	want := "<|im_start|>user\na b<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call><|im_end|>\n<|im_start|>assistant\n"
	if string(first) != want {
		t.Errorf("render = %q, want %q", first, want)
	}
}

func TestConcurrentRenders(t *testing.T) {
	qwen := loadTemplate(t, "qwen3")
	req, err := DecodeRequest([]byte(benchChat))
	if err != nil {
		t.Fatal(err)
	}
	want, err := qwen.Render(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			var buf []byte
			for i := range 25 {
				// Half the goroutines share req, half decode their own.
				r := req
				var err error
				if g%2 == 1 {
					if r, err = DecodeRequest([]byte(benchChat)); err != nil {
						errs <- err
						return
					}
				}
				if buf, err = qwen.Render(buf[:0], r); err != nil {
					errs <- err
					return
				}
				if string(buf) != string(want) {
					errs <- fmt.Errorf("goroutine %d render %d differs", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestVariables(t *testing.T) {
	tmpl, err := Compile(
		"{{ bos_token }}|{{ eos_token }}|{{ tools }}|{{ documents }}|{{ tool_choice is defined }}|{{ reasoning_effort }}|{{ enable_thinking }}|{{ add_generation_prompt }}|{{ strftime_now('%d %b %Y') }}",
		WithSpecialTokens(map[string]string{"bos_token": "<s>", "eos_token": "</s>"}),
		WithClock(goldenClock))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ body, want string }{
		{`{"messages": []}`, "<s>|</s>|None|None|False|||True|02 Jan 2026"},
		{`{"messages": [], "tools": [], "documents": [{"t": 1}], "tool_choice": "auto", "reasoning_effort": "low", "add_generation_prompt": false}`,
			"<s>|</s>|[]|[{'t': 1}]|True|low||False|02 Jan 2026"},
		{`{"messages": [], "reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "high", "enable_thinking": false, "bos_token": "B"}}`,
			"B|</s>|None|None|False|high|False|True|02 Jan 2026"},
	}
	for _, c := range cases {
		req, err := DecodeRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.body, got, c.want)
		}
	}
}

func TestContentFormat(t *testing.T) {
	parts, err := Compile("{% for m in messages %}{% for p in m.content %}[{{ p.type }}]{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	if parts.ContentFormat() != ContentParts {
		t.Fatalf("format = %v, want openai", parts.ContentFormat())
	}
	req, err := DecodeRequest([]byte(`{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parts.Render(nil, req)
	if err != nil || string(got) != "[image_url][text]" {
		t.Errorf("parts render = %q, %v", got, err)
	}
	str, err := Compile("{% for m in messages %}{{ m.content }}{% endfor %}", WithContentFormat(ContentString))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := str.Render(nil, req); err != nil || string(got) != "hi" {
		t.Errorf("string render = %q, %v", got, err)
	}
	for src, want := range map[string]ContentFormat{
		"{{ message.content[0].text }}":                       ContentParts,
		"{% if message['content'] | length > 1 %}{% endif %}": ContentParts,
		"{{ message.content }}":                               ContentString,
	} {
		if got := detectContentFormat(src); got != want {
			t.Errorf("detectContentFormat(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestFromTokenizerConfig(t *testing.T) {
	cfg := `{"bos_token": {"__type": "AddedToken", "content": "<B>"}, "eos_token": "<E>", "unk_token": null,
	  "chat_template": [{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ unk_token is defined }}"}]}`
	tmpl, err := FromTokenizerConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest([]byte(`{"messages": [{"role": "user", "content": "x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tmpl.Render(nil, req); err != nil || string(got) != "<B>x<E>False" {
		t.Errorf("render = %q, %v", got, err)
	}
	for _, bad := range []string{`{}`, `{"chat_template": 5}`, `{"chat_template": [{"name": "x", "template": "y"}]}`, `nope`} {
		var te *TemplateError
		if _, err := FromTokenizerConfig([]byte(bad)); !errors.As(err, &te) {
			t.Errorf("FromTokenizerConfig(%s) = %v, want a *TemplateError", bad, err)
		}
	}
}

func TestStrftimeMatchesPython(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := map[string]string{
		"%d %b %Y":                   "02 Jan 2026",
		"%Y-%m-%d %H:%M:%S":          "2026-01-02 03:04:05",
		"%A %B %-d %I%p %j %y %e %%": "Friday January 2 03AM 002 26  2 %",
		"%q":                         "%q",
	}
	for f, want := range cases {
		if got := strftime(at, f); got != want {
			t.Errorf("strftime(%q) = %q, want %q", f, got, want)
		}
	}
	if got := strftime(at.Add(12*time.Hour), "%I %p"); got != "03 PM" {
		t.Errorf("strftime pm = %q", got)
	}
}

// TestNullContentRendersAsEmpty pins the documented leniency: Qwen3 given
// an assistant message with content null renders it as content "" (jinja2
// would raise TypeError on str + None).
func TestNullContentRendersAsEmpty(t *testing.T) {
	qwen := loadTemplate(t, "qwen3")
	render := func(content string) string {
		t.Helper()
		req, err := DecodeRequest([]byte(`{"messages": [{"role": "user", "content": "w?"}, {"role": "assistant", "content": ` + content +
			`, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "content": "r"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := qwen.Render(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if null, empty := render("null"), render(`""`); null != empty {
		t.Errorf("content null renders\n%q\ncontent \"\" renders\n%q", null, empty)
	}
}
