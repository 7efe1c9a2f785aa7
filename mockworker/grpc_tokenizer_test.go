package mockworker

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/tokenizer"
)

// qwen3Dir is the Qwen3 tokenizer of the tokenizer test data (make tools fetches it).
func qwen3Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SMG_TOKENIZER_DATA")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "smg-tokenizers", "v1")
	}
	dir = filepath.Join(dir, "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("tokenizer test data missing in %s (run make tools): %v", dir, err)
	}
	return dir
}

func TestGRPCAnswerDecodesWithQwen3(t *testing.T) {
	dir := qwen3Dir(t)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := grpcEngine(DialectSGLang)
	cfg.TokenizerPath = dir
	f := startFleet(t, cfg)
	c := sglangpb.NewSglangSchedulerClient(dial(t, f, 0))
	prompt := tok.Encode(nil, "<|im_start|>user\nSay something.<|im_end|>\n<|im_start|>assistant\n", false)
	answer := tok.Encode(nil, AnswerText, false)
	eos := tok.EOSTokenIDs()[0]

	// The answer, then EOS: "stop" with the EOS as the matched token.
	r := sglGenerate(t.Context(), c, sglRequest("q", prompt, 100, true))
	ids := r.ids(0)
	if r.err != nil || len(ids) != len(answer)+1 || ids[len(ids)-1] != eos || r.complete[0].FinishReason != "stop" ||
		r.complete[0].GetMatchedTokenId() != eos || r.complete[0].CompletionTokens != uint32(len(answer)+1) {
		t.Fatalf("answer: %v %v %v", r.err, ids, r.complete)
	}
	if got := string(tok.Decode(nil, ids, true)); got != AnswerText {
		t.Fatalf("decoded %q, want %q", got, AnswerText)
	}

	// The maximum first: "length", a prefix of the text.
	r = sglGenerate(t.Context(), c, sglRequest("short", prompt, 3, false))
	if r.err != nil || r.complete[0].FinishReason != "length" || !slices.Equal(r.complete[0].OutputIds, answer[:3]) {
		t.Fatalf("short: %v %v", r.err, r.complete)
	}

	// ignore_eos: the text repeats up to the maximum.
	req := sglRequest("long", prompt, uint32(3*len(answer)), true)
	req.SamplingParams.IgnoreEos = true
	r = sglGenerate(t.Context(), c, req)
	if got, want := string(tok.Decode(nil, r.ids(0), true)), AnswerText+AnswerText+AnswerText; r.err != nil || got != want {
		t.Fatalf("ignore_eos: %v %q, want %q", r.err, got, want)
	}

	// A stop string ends at the token that completes it, decoded text included.
	req = sglRequest("stop", prompt, 100, true)
	req.SamplingParams.Stop = []string{"sat on"}
	r = sglGenerate(t.Context(), c, req)
	if text := string(tok.Decode(nil, r.ids(0), true)); r.err != nil || text != "the mock cat sat on" ||
		r.complete[0].GetMatchedStopStr() != "sat on" {
		t.Fatalf("stop string: %v %q %v", r.err, text, r.complete)
	}

	mi, err := c.GetModelInfo(t.Context(), &sglangpb.GetModelInfoRequest{})
	if err != nil || int(mi.VocabSize) != tok.VocabSize() || len(mi.EosTokenIds) == 0 || uint32(mi.EosTokenIds[0]) != eos || mi.TokenizerPath != dir {
		t.Fatalf("model info: %v %v", err, mi)
	}

	// GetTokenizer streams a zip of the directory with its sha256 on the last piece.
	st, err := c.GetTokenizer(t.Context(), &commonpb.GetTokenizerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var archive []byte
	var sum string
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		archive, sum = append(archive, ch.Data...), ch.Sha256
	}
	got := sha256.Sum256(archive)
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil || hex.EncodeToString(got[:]) != sum {
		t.Fatalf("tokenizer archive: %v, sha256 %s vs %x", err, sum, got)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	fz, err := zr.Open("tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(fz)
	if !bytes.Equal(data, want) {
		t.Fatal("tokenizer.json differs in the archive")
	}
	idle(t, f.Workers()[0])
}
