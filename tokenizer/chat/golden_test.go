package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goldenFamilies are the tokenizer families whose chat templates have
// goldens (Llama 2's tokenizer config carries no chat template), with the
// content format and tool-argument handling the goldens were rendered with
// (hack/tokenizer/render_goldens.py).
var goldenFamilies = []struct {
	name      string
	parseArgs bool
}{
	{"qwen3", true},
	{"llama3", false},
	{"deepseek_v3", false},
	{"semantics", true}, // testdata/semantics.jinja, not a model's template
}

// goldenClock is the fixed clock render_goldens.py gives strftime_now.
var goldenClock = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func dataDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SMG_TOKENIZER_DATA")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "smg-tokenizers", "v1")
	}
	if _, err := os.Stat(filepath.Join(dir, "qwen3", "tokenizer_config.json")); err != nil {
		t.Fatalf("tokenizer test data missing in %s (run make tools): %v", dir, err)
	}
	return dir
}

func loadTemplate(t testing.TB, family string) *Template {
	t.Helper()
	if family == "semantics" {
		src, err := os.ReadFile(filepath.Join("testdata", "semantics.jinja"))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Compile(string(src), WithClock(goldenClock),
			WithSpecialTokens(map[string]string{"bos_token": "<s>", "eos_token": "</s>"}))
		if err != nil {
			t.Fatal(err)
		}
		return tmpl
	}
	cfg, err := os.ReadFile(filepath.Join(dataDir(t), family, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := FromTokenizerConfig(cfg, WithClock(goldenClock))
	if err != nil {
		t.Fatalf("%s: %v", family, err)
	}
	return tmpl
}

type goldenRequest struct {
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request"`
	Only    []string        `json:"only"`
}

type golden struct {
	Name   string  `json:"name"`
	Prompt *string `json:"prompt"`
	Error  *string `json:"error"`
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldens renders every request of testdata/requests.jsonl with each
// family's real chat template and compares byte for byte with Python jinja2
// (testdata/golden_<family>.jsonl); requests jinja2 rejects must be rejected
// with a *TemplateError.
func TestGoldens(t *testing.T) {
	reqs := map[string]json.RawMessage{}
	for _, r := range readJSONL[goldenRequest](t, filepath.Join("testdata", "requests.jsonl")) {
		reqs[r.Name] = r.Request
	}
	for _, fam := range goldenFamilies {
		t.Run(fam.name, func(t *testing.T) {
			tmpl := loadTemplate(t, fam.name)
			if tmpl.ContentFormat() != ContentString {
				t.Errorf("content format %v, goldens use string", tmpl.ContentFormat())
			}
			if tmpl.ParsesToolArguments() != fam.parseArgs {
				t.Errorf("ParsesToolArguments() = %v, goldens use %v", tmpl.ParsesToolArguments(), fam.parseArgs)
			}
			goldens := readJSONL[golden](t, filepath.Join("testdata", "golden_"+fam.name+".jsonl"))
			if len(goldens) < 30 {
				t.Fatalf("only %d goldens", len(goldens))
			}
			for _, g := range goldens {
				body, ok := reqs[g.Name]
				if !ok {
					t.Fatalf("golden %q has no request", g.Name)
				}
				var got []byte
				req, err := DecodeRequest(body)
				if err == nil {
					got, err = tmpl.Render(nil, req)
				}
				if g.Error != nil {
					var te *TemplateError
					if !errors.As(err, &te) {
						t.Errorf("%s: jinja2 failed (%s), got err=%v output %q", g.Name, *g.Error, err, got)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", g.Name, err)
					continue
				}
				if string(got) != *g.Prompt {
					t.Errorf("%s: mismatch\n got: %q\nwant: %q", g.Name, got, *g.Prompt)
				}
			}
		})
	}
}

type syntaxCase struct {
	Name     string `json:"name"`
	Template string `json:"template"`
}

// TestSyntaxGoldens renders the small templates of testdata/syntax.jsonl
// (whitespace control, value printing, filters, tests, loops, tojson
// options, raise_exception) with testdata/syntax_request.json and compares
// byte for byte with Python jinja2 (testdata/golden_syntax.jsonl).
func TestSyntaxGoldens(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "syntax_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{}
	for _, c := range readJSONL[syntaxCase](t, filepath.Join("testdata", "syntax.jsonl")) {
		cases[c.Name] = c.Template
	}
	goldens := readJSONL[golden](t, filepath.Join("testdata", "golden_syntax.jsonl"))
	if len(goldens) != len(cases) {
		t.Fatalf("%d goldens for %d cases", len(goldens), len(cases))
	}
	for _, g := range goldens {
		tmpl, err := Compile(cases[g.Name], WithClock(goldenClock),
			WithSpecialTokens(map[string]string{"bos_token": "<s>", "eos_token": "</s>"}))
		var got []byte
		if err == nil {
			got, err = tmpl.Render(nil, req)
		}
		if g.Error != nil {
			var te *TemplateError
			if !errors.As(err, &te) {
				t.Errorf("%s: jinja2 failed (%s), got err=%v output %q", g.Name, *g.Error, err, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", g.Name, err)
		} else if string(got) != *g.Prompt {
			t.Errorf("%s: mismatch\n got: %q\nwant: %q", g.Name, got, *g.Prompt)
		}
	}
}

type engineGolden struct {
	golden
	Template  string `json:"template"`
	Format    string `json:"format"`
	ParseArgs bool   `json:"parse_args"`
}

// TestEngineTemplateGoldens renders the requests of testdata/requests.jsonl
// with the chat templates github.com/ardanlabs/jinja ships in its testdata
// (Qwen3.5/3.6/VL, Llama 3.2, Mistral, Gemma 4, gpt-oss, GLM, Kimi,
// Nemotron, ...) and compares with jinja2 (golden_engine_templates.jsonl).
// Requests jinja2 rejects through raise_exception must be rejected the
// same way.
func TestEngineTemplateGoldens(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "github.com", "ardanlabs", "jinja@v1.8.0", "testdata", "templates")
	reqs := map[string]json.RawMessage{}
	for _, r := range readJSONL[goldenRequest](t, filepath.Join("testdata", "requests.jsonl")) {
		reqs[r.Name] = r.Request
	}
	templates := map[string]*Template{}
	perTemplate := map[string]int{}
	for _, g := range readJSONL[engineGolden](t, filepath.Join("testdata", "golden_engine_templates.jsonl")) {
		tmpl := templates[g.Template]
		if tmpl == nil {
			src, err := os.ReadFile(filepath.Join(dir, g.Template))
			if err != nil {
				t.Fatalf("engine testdata template (go mod download github.com/ardanlabs/jinja): %v", err)
			}
			if tmpl, err = Compile(string(src), WithClock(goldenClock),
				WithSpecialTokens(map[string]string{"bos_token": "<s>", "eos_token": "</s>"})); err != nil {
				t.Fatalf("%s: %v", g.Template, err)
			}
			templates[g.Template] = tmpl
			if tmpl.ContentFormat().String() != g.Format || tmpl.ParsesToolArguments() != g.ParseArgs {
				t.Errorf("%s: detected format %v, parse arguments %v; goldens use %s, %v",
					g.Template, tmpl.ContentFormat(), tmpl.ParsesToolArguments(), g.Format, g.ParseArgs)
			}
		}
		perTemplate[g.Template]++
		req, err := DecodeRequest(reqs[g.Name])
		if err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		got, err := tmpl.Render(nil, req)
		if g.Error != nil {
			var te *TemplateError
			if !errors.As(err, &te) {
				t.Errorf("%s %s: jinja2 failed (%s), got err=%v", g.Template, g.Name, *g.Error, err)
			} else if raised := strings.HasPrefix(*g.Error, "TemplateError: "); raised != te.Raised ||
				(raised && te.Msg != strings.TrimPrefix(*g.Error, "TemplateError: ")) {
				t.Errorf("%s %s: jinja2 error %q, got %+v", g.Template, g.Name, *g.Error, te)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", g.Template, g.Name, err)
		} else if string(got) != *g.Prompt {
			t.Errorf("%s %s: mismatch\n got: %q\nwant: %q", g.Template, g.Name, got, *g.Prompt)
		}
	}
	if len(perTemplate) < 10 {
		t.Fatalf("goldens cover %d templates", len(perTemplate))
	}
	for name, n := range perTemplate {
		if n < 30 {
			t.Errorf("%s: %d goldens", name, n)
		}
	}
}
