package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smg-go/smg/tokenizer"
)

// modelDir is a model directory of the tokenizer test data (make tools fetches it).
func modelDir(t testing.TB, family string) string {
	t.Helper()
	root := os.Getenv("SMG_TOKENIZER_DATA")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "smg-tokenizers", "v1")
	}
	dir := filepath.Join(root, family)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("tokenizer test data missing (%v): run make tools", err)
	}
	return dir
}

type goldenLine struct {
	Text       string   `json:"text"`
	IDs        []uint32 `json:"ids"`
	IDsSpecial []uint32 `json:"ids_special"`
	Decoded    string   `json:"decoded"`
}

func goldenLines(t *testing.T, family string, n int) []goldenLine {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "tokenizer", "testdata", "golden", family+".jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 16<<20)
	var lines []goldenLine
	for len(lines) < n && sc.Scan() {
		var g goldenLine
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, g)
	}
	return lines
}

func runTok(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runTokenizer(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestTokenizerCommandMatchesHuggingFace: `smg tokenizer encode` and `decode` give Hugging
// Face's ids and text for the golden corpus's first lines, one output line per input line.
func TestTokenizerCommandMatchesHuggingFace(t *testing.T) {
	dir := modelDir(t, "qwen3")
	golden := goldenLines(t, "qwen3", 300)
	var in, wantIDs, ids strings.Builder
	for _, g := range golden {
		text, _ := json.Marshal(g.Text)
		in.Write(text)
		in.WriteByte('\n')
		want, _ := json.Marshal(g.IDsSpecial)
		wantIDs.Write(want)
		wantIDs.WriteByte('\n')
		ids.Write(want)
		ids.WriteByte('\n')
	}
	code, out, errs := runTok(t, in.String(), "encode", "--model-path", dir, "--add-special-tokens")
	if code != 0 || out != wantIDs.String() {
		t.Fatalf("encode: exit %d, stderr %q; output differs from Hugging Face's ids (%d vs %d bytes)", code, errs, len(out), wantIDs.Len())
	}
	code, out, errs = runTok(t, ids.String(), "decode", "--model-path", dir)
	var got []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var s string
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("decode printed %q: %v", l, err)
		}
		got = append(got, s)
	}
	if code != 0 || len(got) != len(golden) {
		t.Fatalf("decode: exit %d, stderr %q, %d lines for %d", code, errs, len(got), len(golden))
	}
	for i, g := range golden {
		if got[i] != g.Decoded {
			t.Fatalf("decode line %d: %q, Hugging Face %q", i+1, got[i], g.Decoded)
		}
	}
}

// TestTokenizerCommandRefusesBadInput: a bad directory or command line exits 2 with a message
// that says what to give; a bad line exits 1 naming the line.
func TestTokenizerCommandRefusesBadInput(t *testing.T) {
	dir := modelDir(t, "qwen3")
	for _, c := range []struct {
		args      []string
		stdin     string
		code      int
		wantInErr string
	}{
		{[]string{"encode"}, "", 2, "--model-path is required"},
		{[]string{"encode", "--model-path", t.TempDir()}, "", 2, "tokenizer.json"},
		{[]string{"transmogrify", "--model-path", dir}, "", 2, "use encode, decode or render"},
		{[]string{"encode", "--model-path", dir, "--bogus"}, "", 2, "--bogus"},
		{[]string{"encode", "--model-path", dir}, "\"ok\"\nnot json\n", 1, "line 2: want one JSON string"},
		{[]string{"decode", "--model-path", dir}, "[1,2]\n[-1]\n", 1, "line 2: want one JSON array"},
		{[]string{"decode", "--model-path", dir}, "[4000000000]\n", 1, "outside the vocabulary"},
	} {
		code, _, errs := runTok(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(errs, c.wantInErr) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.wantInErr)
		}
	}
}

// FuzzTokenizerCommand: any stdin gives output or an error, never a panic, and without an
// error one output line per non-empty input line (a line ending CRLF counts without its CR).
func FuzzTokenizerCommand(f *testing.F) {
	tok, err := tokenizer.Load(modelDir(f, "qwen3"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"\"hello\"\n", "[1,2,3]\n", "\"\\ud800\"\n", "\n\n", "[]\n", "\"<|im_start|>user\"\n", "{}\n", "[4294967295]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stdin string) {
		for _, verb := range []string{"encode", "decode"} {
			step, err := tokenizerStep(verb, "", tok, true, true)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := eachLine(strings.NewReader(stdin), &out, step); err == nil {
				lines := 0
				for _, l := range strings.Split(stdin, "\n") {
					if strings.TrimSuffix(l, "\r") != "" { // CRLF input: the CR is no line of its own
						lines++
					}
				}
				if got := strings.Count(out.String(), "\n"); got != lines {
					t.Fatalf("%s: %d output lines for %d input lines", verb, got, lines)
				}
			}
		}
	})
}

// TestTokenizerRenderMatchesJinja2: `smg tokenizer render` prints jinja2's prompt for every
// request of the chat template goldens (tokenizer/chat/testdata, rendered by Python jinja2).
func TestTokenizerRenderMatchesJinja2(t *testing.T) {
	dir := modelDir(t, "qwen3")
	read := func(name string) []map[string]json.RawMessage {
		b, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "chat", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]json.RawMessage
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var row map[string]json.RawMessage
			if err := json.Unmarshal([]byte(l), &row); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
		}
		return rows
	}
	requests := map[string]json.RawMessage{}
	for _, r := range read("requests.jsonl") {
		requests[string(r["name"])] = r["request"]
	}
	var in, want strings.Builder
	n := 0
	for _, g := range read("golden_qwen3.jsonl") {
		req, ok := requests[string(g["name"])]
		if !ok || g["prompt"] == nil {
			continue
		}
		in.Write(req)
		in.WriteByte('\n')
		var prompt string
		if err := json.Unmarshal(g["prompt"], &prompt); err != nil {
			t.Fatal(err)
		}
		want.Write(appendJSONString(nil, prompt))
		want.WriteByte('\n')
		n++
	}
	if n < 30 {
		t.Fatalf("only %d golden renders found", n)
	}
	code, out, errs := runTok(t, in.String(), "render", "--model-path", dir)
	if code != 0 {
		t.Fatalf("render: exit %d: %s", code, errs)
	}
	got, wantLines := strings.Split(out, "\n"), strings.Split(want.String(), "\n")
	if len(got) != len(wantLines) {
		t.Fatalf("render printed %d lines for %d requests", len(got)-1, n)
	}
	for i := range got {
		if got[i] != wantLines[i] {
			t.Fatalf("render line %d:\n got %s\nwant %s", i+1, got[i], wantLines[i])
		}
	}
	code, _, errs = runTok(t, `{"messages": "not a list"}`+"\n", "render", "--model-path", dir)
	if code != 1 || !strings.Contains(errs, "line 1") {
		t.Fatalf("a bad request: exit %d, stderr %q; want exit 1 naming line 1", code, errs)
	}
}
