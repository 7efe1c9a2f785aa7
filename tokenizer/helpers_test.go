package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var families = []string{"qwen3", "llama3", "llama2", "deepseek_v3"}

func dataDir(t testing.TB) string {
	d := os.Getenv("SMG_TOKENIZER_DATA")
	if d == "" {
		home, _ := os.UserHomeDir()
		d = filepath.Join(home, ".cache/smg-tokenizers/v1")
	}
	if _, err := os.Stat(filepath.Join(d, "qwen3", "tokenizer.json")); err != nil {
		t.Fatalf("tokenizer data missing in %s (run make tools): %v", d, err)
	}
	return d
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

func family(t testing.TB, name string) *Tokenizer {
	loadMu.Lock()
	defer loadMu.Unlock()
	if tk := loaded[name]; tk != nil {
		return tk
	}
	tk, err := Load(filepath.Join(dataDir(t), name))
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	loaded[name] = tk
	return tk
}

type goldenLine struct {
	Text        string   `json:"text"`
	IDs         []uint32 `json:"ids"`
	IDsSpecial  []uint32 `json:"ids_special"`
	Decoded     string   `json:"decoded"`
	DecodedSkip string   `json:"decoded_skip"`
}

var (
	goldenMu sync.Mutex
	goldens  = map[string][]goldenLine{}
)

func readGolden(t testing.TB, name string) []goldenLine {
	goldenMu.Lock()
	defer goldenMu.Unlock()
	if g := goldens[name]; g != nil {
		return g
	}
	f, err := os.Open(filepath.Join("testdata", "golden", name+".jsonl.gz"))
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<26)
	var out []goldenLine
	for sc.Scan() {
		var l goldenLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("golden %s line %d: %v", name, len(out)+1, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 1000 {
		t.Fatalf("golden %s has only %d lines", name, len(out))
	}
	goldens[name] = out
	return out
}

func eqIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
