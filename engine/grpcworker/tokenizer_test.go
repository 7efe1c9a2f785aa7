package grpcworker

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func zipOf(t testing.TB, files map[string][]byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:])
}

// TestUnpackTokenizer: the three files come out of a checked archive; a wrong checksum, a
// missing or nested tokenizer.json and a file past the bound are refused with the way out.
func TestUnpackTokenizer(t *testing.T) {
	good, sum := zipOf(t, map[string][]byte{"tokenizer.json": []byte(`{"model":{}}`), "tokenizer_config.json": []byte(`{}`), "vocab.json": []byte(`{}`)})
	files, err := unpackTokenizer(good, sum, MaxTokenizerFileBytes)
	if err != nil || string(files.Tokenizer) != `{"model":{}}` || string(files.Config) != `{}` || files.Generation != nil {
		t.Fatalf("good archive: %+v %v", files, err)
	}
	nested, nestedSum := zipOf(t, map[string][]byte{"sub/tokenizer.json": []byte(`{}`)})
	bomb, bombSum := zipOf(t, map[string][]byte{"tokenizer.json": make([]byte, 64<<10)}) // 64 KiB of zeros: a few hundred bytes zipped
	for _, c := range []struct {
		name, want string
		archive    []byte
		sum        string
	}{
		{"wrong checksum", "sha256", good, strings.Repeat("0", 64)},
		{"no checksum", "sha256", good, ""},
		{"not a zip", "not a zip", []byte("plain"), hexSum([]byte("plain"))},
		{"nested tokenizer.json", "no tokenizer.json", nested, nestedSum},
		{"a file past the bound", "larger than", bomb, bombSum},
	} {
		if _, err := unpackTokenizer(c.archive, c.sum, 32<<10); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// FuzzUnpackTokenizer: any archive bytes are refused or unpacked, never a panic, and what
// comes out is within the bounds.
func FuzzUnpackTokenizer(f *testing.F) {
	good, _ := zipOf(f, map[string][]byte{"tokenizer.json": []byte(`{"model":{}}`), "generation_config.json": []byte(`{"eos_token_id":2}`)})
	f.Add(good)
	f.Add([]byte("PK\x03\x04"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, archive []byte) {
		files, err := unpackTokenizer(archive, hexSum(archive), 1<<20)
		if err != nil {
			return
		}
		if files.Tokenizer == nil || len(files.Tokenizer) > 1<<20 || len(files.Config) > 1<<20 {
			t.Fatalf("unpacked out of bounds: %d %d", len(files.Tokenizer), len(files.Config))
		}
	})
}
