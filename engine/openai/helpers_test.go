package openai

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/smg-go/smg/tokenizer"
)

// wordDecoder decodes id i to words[i]; ids past the list are special tokens and decode to
// "<special>" unless skipped. Enough to check the answer's shapes byte for byte.
type wordDecoder []string

func (d wordDecoder) Decode(dst []byte, ids []uint32, skip bool) []byte {
	for _, id := range ids {
		if int(id) < len(d) {
			dst = append(dst, d[id]...)
		} else if !skip {
			dst = append(dst, "<special>"...)
		}
	}
	return dst
}

var (
	qwenOnce sync.Once
	qwenTok  *tokenizer.Tokenizer
	qwenErr  error
)

// qwen3 loads the real Qwen3 tokenizer (bash hack/tokenizer/fetch.sh installs it).
func qwen3(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	qwenOnce.Do(func() {
		d := os.Getenv("SMG_TOKENIZER_DATA")
		if d == "" {
			home, _ := os.UserHomeDir()
			d = filepath.Join(home, ".cache/smg-tokenizers/v1")
		}
		qwenTok, qwenErr = tokenizer.Load(filepath.Join(d, "qwen3"))
	})
	if qwenErr != nil {
		t.Fatalf("the Qwen3 tokenizer is missing (run bash hack/tokenizer/fetch.sh): %v", qwenErr)
	}
	return qwenTok
}
