package openai

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/tokenizer/chat"
)

// cpuNanos is the process's user+system CPU time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStreamedChat4KB is the gateway's own work for one streamed chat request with a
// 4 KB prompt and a 128-token answer: parse, chat template, encode, and the 128 tokens
// through the detokenizer into SSE events (the gRPC transport and the sockets excluded;
// grpcworker's BenchmarkRecv measures the transport). cpu-ns/op is the process's CPU per
// request.
func BenchmarkStreamedChat4KB(b *testing.B) {
	tok := qwen3(b)
	home, _ := os.UserHomeDir()
	dir := os.Getenv("SMG_TOKENIZER_DATA")
	if dir == "" {
		dir = filepath.Join(home, ".cache/smg-tokenizers/v1")
	}
	tc, err := os.ReadFile(filepath.Join(dir, "qwen3", "tokenizer_config.json"))
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := chat.FromTokenizerConfig(tc)
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for i := 0; sb.Len() < 4096; i++ {
		fmt.Fprintf(&sb, "Sentence %d of the prompt talks about routing, caches and tokens. ", i)
	}
	body := []byte(fmt.Sprintf(`{"model":"qwen3","stream":true,"max_tokens":128,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":%q}]}`, sb.String()))
	answer := tok.Encode(nil, strings.Repeat("The answer is a sentence of ordinary English words, repeated. ", 20), false)[:128]
	var (
		r       Request
		w       Writer
		ids     []uint32
		scratch []byte
		out     []byte
		ch      = grpcworker.Chunk{TokenIDs: make([]uint32, 1)}
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuNanos()
	for range b.N {
		if err := Parse(Chat, body, &r); err != nil {
			b.Fatal(err)
		}
		ids, scratch, err = r.Prompt(tok, tmpl, body, 0, ids[:0], scratch)
		if err != nil {
			b.Fatal(err)
		}
		w.Reset(&r, tok, tok.EOSTokenIDs(), "chatcmpl-x", 1, len(ids))
		for _, id := range answer {
			ch.TokenIDs[0] = id
			out = w.Feed(out[:0], &ch)
		}
		out = w.End(out[:0], "length")
	}
	b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRelayToken is one relayed token: detokenize, stop check, one SSE event.
func BenchmarkRelayToken(b *testing.B) {
	tok := qwen3(b)
	answer := tok.Encode(nil, strings.Repeat("The answer is a sentence of ordinary English words, repeated. ", 200), false)
	var r Request
	if err := Parse(Chat, []byte(`{"stream":true,"stop":["never seen"],"model":"qwen3"}`), &r); err != nil {
		b.Fatal(err)
	}
	var w Writer
	w.Reset(&r, tok, tok.EOSTokenIDs(), "chatcmpl-x", 1, 10)
	out := make([]byte, 0, 4096)
	ch := grpcworker.Chunk{TokenIDs: make([]uint32, 1)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(answer) == 0 {
			w.Reset(&r, tok, tok.EOSTokenIDs(), "chatcmpl-x", 1, 10)
		}
		ch.TokenIDs[0] = answer[i%len(answer)]
		out = w.Feed(out[:0], &ch)
	}
}
