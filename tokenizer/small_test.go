package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loadSmall(t testing.TB, name string) *Tokenizer {
	t.Helper()
	tj, err := os.ReadFile(filepath.Join("testdata", "small", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join("testdata", "small", name+"_config.json"))
	gen, _ := os.ReadFile(filepath.Join("testdata", "small", name+"_generation.json"))
	tk, err := LoadJSON(tj, cfg, gen)
	if err != nil {
		t.Fatalf("LoadJSON(%s): %v", name, err)
	}
	return tk
}

// TestSmallTokenizers: handcrafted tokenizer.json files exercising options
// the four model families do not (single_word, lstrip, rstrip, Metaspace,
// unk with fuse_unk, byte_fallback, ignore_merges, NFKC, Replace, a String
// Split, Roberta and Sequence post-processors, the Metaspace decoder) give
// what Hugging Face tokenizers gives (testdata/small/expect.jsonl, written
// by its Node binding).
func TestSmallTokenizers(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "small", "expect.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	toks := map[string]*Tokenizer{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var l struct {
			File string `json:"file"`
			goldenLine
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		tk := toks[l.File]
		if tk == nil {
			tk = loadSmall(t, l.File)
			toks[l.File] = tk
		}
		n++
		if got := tk.Encode(nil, l.Text, false); !eqIDs(got, l.IDs) {
			t.Errorf("%s %q: ids %v, want %v", l.File, l.Text, got, l.IDs)
		}
		if got := tk.Encode(nil, l.Text, true); !eqIDs(got, l.IDsSpecial) {
			t.Errorf("%s %q: ids_special %v, want %v", l.File, l.Text, got, l.IDsSpecial)
		}
		if got := string(tk.Decode(nil, l.IDsSpecial, false)); got != l.Decoded {
			t.Errorf("%s %q: decoded %q, want %q", l.File, l.Text, got, l.Decoded)
		}
		if got := string(tk.Decode(nil, l.IDsSpecial, true)); got != l.DecodedSkip {
			t.Errorf("%s %q: decoded_skip %q, want %q", l.File, l.Text, got, l.DecodedSkip)
		}
	}
	if n < 60 {
		t.Fatalf("only %d expectations", n)
	}
}

func TestConfig(t *testing.T) {
	tk := loadSmall(t, "fallback")
	if got := tk.ChatTemplate(); got != "D" {
		t.Errorf("ChatTemplate = %q, want the default entry", got)
	}
	if tk.BOSToken() != "<s>" || tk.EOSToken() != "</s>" || !tk.AddBOSToken() {
		t.Errorf("bos %q eos %q add_bos %v", tk.BOSToken(), tk.EOSToken(), tk.AddBOSToken())
	}
	if got := tk.EOSTokenIDs(); !slices.Equal(got, []uint32{0, 2}) {
		t.Errorf("EOSTokenIDs = %v, want [0 2]", got)
	}
	for _, fam := range families {
		tk := family(t, fam)
		if hasTemplate := fam != "llama2"; strings.Contains(tk.ChatTemplate(), "message") != hasTemplate {
			t.Errorf("%s: chat template %.40q", fam, tk.ChatTemplate())
		}
		if len(tk.EOSTokenIDs()) == 0 || tk.EOSToken() == "" {
			t.Errorf("%s: eos %q ids %v", fam, tk.EOSToken(), tk.EOSTokenIDs())
		}
		id, ok := tk.TokenID(tk.EOSToken())
		if !ok || !tk.IsSpecial(id) || tk.Token(id) != tk.EOSToken() || int(id) >= tk.VocabSize() {
			t.Errorf("%s: eos %q id %d ok %v special %v", fam, tk.EOSToken(), id, ok, tk.IsSpecial(id))
		}
	}
	want := map[string]struct {
		bos    string
		addBOS bool
		vocab  int
	}{
		"qwen3":       {"", false, 151669},
		"llama3":      {"<|begin_of_text|>", false, 128256},
		"llama2":      {"<s>", true, 32000},
		"deepseek_v3": {"<｜begin▁of▁sentence｜>", true, 128815},
	}
	for fam, w := range want {
		tk := family(t, fam)
		if tk.BOSToken() != w.bos || tk.AddBOSToken() != w.addBOS || tk.VocabSize() != w.vocab {
			t.Errorf("%s: bos %q add_bos %v vocab %d, want %+v", fam, tk.BOSToken(), tk.AddBOSToken(), tk.VocabSize(), w)
		}
	}
}

// TestRefusals: every unsupported component or option is refused at load
// with an error naming it.
func TestRefusals(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("testdata", "small", "metaspace.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field, value, want string
	}{
		{"pre_tokenizer", `{"type":"Whitespace"}`, `cannot load tokenizer: pre_tokenizer type "Whitespace" is not supported`},
		{"pre_tokenizer", `{"type":"Split","pattern":{"Regex":"\\w+"},"behavior":"Isolated","invert":false}`, `pre_tokenizer Split pattern "\\w+" is not supported`},
		{"pre_tokenizer", `{"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":false}`, `pre_tokenizer Split behavior "Removed" is not supported`},
		{"pre_tokenizer", `{"type":"Split","pattern":{"String":" "},"behavior":"Isolated","invert":true}`, `pre_tokenizer Split invert true is not supported`},
		{"pre_tokenizer", `{"type":"Sequence","pretokenizers":[{"type":"ByteLevel"},{"type":"Metaspace","replacement":"_"}]}`, `ByteLevel followed by another pre_tokenizer`},
		{"pre_tokenizer", `{"type":"Metaspace","replacement":"_","prepend_scheme":"sometimes"}`, `prepend_scheme "sometimes" is not supported`},
		{"normalizer", `{"type":"Lowercase"}`, `normalizer type "Lowercase" is not supported`},
		{"normalizer", `{"type":"Replace","pattern":{"Regex":" +"},"content":" "}`, `normalizer Replace Regex pattern " +" is not supported`},
		{"normalizer", `{"type":"Sequence","normalizers":[{"type":"BertNormalizer"}]}`, `normalizer type "BertNormalizer" is not supported`},
		{"normalizer", `{"type":"Sequence","normalizers":{"type":"NFC"}}`, `normalizer Sequence: normalizers: json: cannot unmarshal object`},
		{"post_processor", `{"type":"Unknown"}`, `post_processor type "Unknown" is not supported`},
		{"decoder", `{"type":"WordPiece","prefix":"##"}`, `decoder type "WordPiece" is not supported`},
		{"decoder", `{"type":"CTC"}`, `decoder type "CTC" is not supported`},
		{"model", `{"type":"WordPiece","vocab":{}}`, `model type "WordPiece" is not supported`},
		{"model", `{"type":"Unigram","vocab":[]}`, `model type "Unigram" is not supported`},
		{"model", `{"type":"BPE","vocab":{"a":0},"merges":[],"dropout":0.1}`, `dropout is not supported`},
		{"model", `{"type":"BPE","vocab":{"a":0},"merges":[],"continuing_subword_prefix":"##"}`, `continuing_subword_prefix is not supported`},
		{"model", `{"type":"BPE","vocab":{"a":0},"merges":[],"end_of_word_suffix":"</w>"}`, `end_of_word_suffix is not supported`},
		{"model", `{"type":"BPE","vocab":{"a":0},"merges":["a b"]}`, `merge "a" "b" has a token not in the vocab`},
		{"model", `{"type":"BPE","vocab":{"a":0},"merges":[],"unk_token":"<unk>"}`, `unk_token "<unk>" is not in the vocab`},
		{"truncation", `{"max_length":5}`, `truncation is not supported`},
		{"padding", `{"strategy":"BatchLongest"}`, `padding is not supported`},
	}
	for _, c := range cases {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		m[c.field] = json.RawMessage(c.value)
		b, _ := json.Marshal(m)
		_, err := LoadJSON(b, nil, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "cannot load tokenizer: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: error %v, want one containing %q", c.field, c.value, err, c.want)
		}
	}
	// A Sequence reads only its own section's list, as Hugging Face's reader does.
	for field, value := range map[string]string{
		"normalizer":    `{"type":"Sequence","normalizers":[],"decoders":5}`,
		"pre_tokenizer": `{"type":"Sequence","pretokenizers":[{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}],"normalizers":"x"}`,
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		m[field] = json.RawMessage(value)
		b, _ := json.Marshal(m)
		if _, err := LoadJSON(b, nil, nil); err != nil {
			t.Errorf("%s=%s: %v, want it loaded (other sections' keys are ignored)", field, value, err)
		}
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("Load(empty dir) = %v", err)
	}
}
