package mockworker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
)

// TestHTTPEngineTokenizesPromptsAsTheEngineDoes: with a tokenizer, an HTTP engine's KV
// blocks are the chat template's rendering encoded by the model's tokenizer (the ids a real
// engine's front end computes), so its BlockStored events name real token ids; a completions
// prompt is encoded with the model's special tokens.
func TestHTTPEngineTokenizesPromptsAsTheEngineDoes(t *testing.T) {
	dir := qwen3Dir(t)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.FromTokenizerConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, config(func(c *Config) {
		c.Mode, c.TimeScale, c.OutputTokens, c.KVEvents, c.TokenizerPath = ModeEngine, 1000, 1, true, dir
	}))
	w := f.Workers()[0]
	frames := subscribe(t, w)
	want := map[string][]uint32{} // the first block's tokens → the prompt's ids
	var got []uint32
	sent := 0
	testutil.Eventually(t, "a published batch", func() bool {
		select {
		case fr := <-frames:
			got = firstStoredTokens(t, fr[2])
			return true
		default:
			sent++
			text := fmt.Sprintf("Request %d: tell me a long story about the sea, the wind and the ships that sail on it.", sent)
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":%q}],"max_tokens":1}`, text)
			req, err := chat.DecodeRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			rendered, err := tmpl.Render(nil, req)
			if err != nil {
				t.Fatal(err)
			}
			ids := tok.Encode(nil, string(rendered), false)
			want[fmt.Sprint(ids[:16])] = ids
			do(t, "POST", w.URL()+"/v1/chat/completions", body)
			return false
		}
	})
	ids, ok := want[fmt.Sprint(got[:min(16, len(got))])]
	if !ok || len(got)%16 != 0 || !slices.Equal(got, ids[:len(got)]) {
		t.Fatalf("stored tokens %v are not the leading blocks of any chat prompt's ids", got)
	}

	// A completions prompt: the text with the model's special tokens (Qwen3 adds none).
	prompt := "The quick brown fox jumps over the lazy dog, again and again, until the day is done and night falls."
	wantIDs := tok.Encode(nil, prompt, true)
	do(t, "POST", w.URL()+"/v1/completions", fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":1}`, prompt))
	testutil.Eventually(t, "the completion's blocks published", func() bool {
		select {
		case fr := <-frames:
			got = firstStoredTokens(t, fr[2])
			return len(got) <= len(wantIDs) && slices.Equal(got, wantIDs[:len(got)])
		default:
			return false
		}
	})
}

// firstStoredTokens returns the token ids of a batch's first BlockStored event (tagged maps).
func firstStoredTokens(t *testing.T, payload []byte) []uint32 {
	t.Helper()
	b, ok := generic(t, payload).(map[string]any)
	if !ok {
		t.Fatalf("batch %v", generic(t, payload))
	}
	for _, e := range b["events"].([]any) {
		ev := e.(map[string]any)
		if ev["type"] != "BlockStored" {
			continue
		}
		var ids []uint32
		for _, v := range ev["token_ids"].([]any) {
			var n uint64
			if _, err := fmt.Sscan(fmt.Sprint(v), &n); err != nil {
				t.Fatalf("token id %v: %v", v, err)
			}
			ids = append(ids, uint32(n))
		}
		return ids
	}
	return nil
}
