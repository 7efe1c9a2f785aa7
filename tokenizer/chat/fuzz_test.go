package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzTemplates are the templates FuzzRender renders with: the real ones and
// testdata/semantics.jinja.
func fuzzTemplates(t testing.TB) []*Template {
	var out []*Template
	for _, fam := range goldenFamilies {
		out = append(out, loadTemplate(t, fam.name))
	}
	return out
}

func addRequestSeeds(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "requests.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		var r goldenRequest
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(r.Request))
	}
	for _, s := range []string{
		`{"messages": []}`,
		`{"messages": [{"role": "tool"}]}`,
		`{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"arguments": "[1, {\"a\": 2}]"}}]}]}`,
		`{"messages": [{"content": [{"type": "text"}, 5, null]}], "tools": {"not": "a list"}, "chat_template_kwargs": {"messages": 1}}`,
		`{"messages": [{"role": "user", "content": "\ud800 \u0000"}], "add_generation_prompt": null}`,
		`{"messages": [{"role": 7, "content": {"a": [1e999, -0.0]}}]}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzRender feeds arbitrary request bodies through DecodeRequest and every
// fuzz template: no panic, every error a *TemplateError, the decoder
// accepting exactly the JSON encoding/json accepts (within its depth limit),
// and rendering deterministic.
func FuzzRender(f *testing.F) {
	addRequestSeeds(f)
	templates := fuzzTemplates(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		_, jerr := DecodeJSON(body)
		if valid := json.Valid(body); valid != (jerr == nil) && !strings.Contains(errString(jerr), "nesting deeper") {
			t.Fatalf("json.Valid = %v but DecodeJSON error = %v", valid, jerr)
		}
		req, err := DecodeRequest(body)
		if err != nil {
			requireTemplateError(t, err)
			return
		}
		for _, tmpl := range templates {
			out, err := tmpl.Render(nil, req)
			if err != nil {
				requireTemplateError(t, err)
				if out != nil {
					t.Fatalf("failed Render returned output %q", out)
				}
				continue
			}
			again, err := tmpl.Render(nil, req)
			if err != nil || string(again) != string(out) {
				t.Fatalf("second render differs: %v\n%q\n%q", err, out, again)
			}
		}
	})
}

// FuzzCompile feeds arbitrary template sources through Compile and renders
// those that compile with a small fixed request: no panic, every error a
// *TemplateError. Sources using macros, call blocks, range or "*" are only
// compiled: the engine has no recursion or size limits, so they can ask for
// unbounded stack or memory (chat templates are trusted configuration).
func FuzzCompile(f *testing.F) {
	for _, fam := range goldenFamilies[:3] {
		cfg, err := os.ReadFile(filepath.Join(dataDir(f), fam.name, "tokenizer_config.json"))
		if err != nil {
			f.Fatal(err)
		}
		var c struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil {
			f.Fatal(err)
		}
		f.Add(c.ChatTemplate)
	}
	sem, err := os.ReadFile(filepath.Join("testdata", "semantics.jinja"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(sem))
	for _, s := range []string{
		"", "{{", "{%", "{#", "{{ }}", "{% %}", "{% endfor %}", "{% if %}{% elif %}{% else %}{% endif %}",
		"{% for a, b in messages | dictsort %}{{ a }}{% else %}x{% endfor %}",
		"{{ messages[0]['content'][::-1] | tojson(indent=2, sort_keys=true) }}",
		"{% set x %}{{ 1 }}{% endset %}{{ x }}{% raw %}{{ y }}{% endraw %}",
		"{{ raise_exception('no') }}", "{{ strftime_now('%Y') }}", "{{ none.attr.deeper }}",
		"{% filter upper %}a{% endfilter %}{{ 'a' ~ 1 ~ none }}", "{{ (1, 2) }}{{ {'a': [1.5]} }}",
		"{% generation %}x{% endgeneration %}", "{{ x | unknownfilter }}", "{{ x is unknowntest }}",
	} {
		f.Add(s)
	}
	req, err := DecodeRequest([]byte(benchChat))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(src)
		if err != nil {
			requireTemplateError(t, err)
			return
		}
		for _, unbounded := range []string{"macro", "call", "range", "*"} {
			if strings.Contains(src, unbounded) {
				return
			}
		}
		if _, err := tmpl.Render(nil, req); err != nil {
			requireTemplateError(t, err)
		}
	})
}

func requireTemplateError(t *testing.T, err error) {
	t.Helper()
	var te *TemplateError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *TemplateError", err, err)
	}
	if te.Error() == "" {
		t.Fatal("empty error message")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
