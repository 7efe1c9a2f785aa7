package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
)

// FuzzWriter feeds a Writer an arbitrary chunk sequence (choice index, token ids, finals)
// for each route, streamed and not: every event and every body must be valid JSON, a
// streamed answer must end with [DONE], and each choice's streamed text must equal the text
// the same chunks give unstreamed.
func FuzzWriter(f *testing.F) {
	f.Add(uint8(0), uint8(2), []byte{0, 1, 2, 0x80, 3, 4, 0x81, 5, 10})
	f.Add(uint8(1), uint8(1), []byte{3, 4, 5, 0x80})
	f.Add(uint8(2), uint8(3), []byte{0x40, 1, 0x41, 2, 0xc1, 0x80, 0x82})
	f.Fuzz(func(t *testing.T, kind, n uint8, script []byte) {
		k := Kind(kind % 3)
		n = n%3 + 1
		body := `{"prompt":"p","text":"t","n":` + string('0'+rune(n)) + `,"stop":["STOP","d!"],"stream_options":{"include_usage":true}`
		if k == Generate {
			body = `{"text":"t","sampling_params":{"n":` + string('0'+rune(n)) + `,"stop":["STOP","d!"]}`
		}
		texts := [2]map[int]string{}
		for s, stream := range []bool{false, true} {
			b := body
			if stream {
				b += `,"stream":true`
			}
			var r Request
			if err := Parse(k, []byte(b+"}"), &r); err != nil {
				t.Fatal(err)
			}
			var w Writer
			w.Reset(&r, words, []uint32{eos}, "id", 1, 3)
			var out []byte
			for _, c := range chunks(script, int(n)) {
				out = w.Feed(out, &c)
			}
			out = w.End(out, "abort")
			texts[s] = collect(t, k, stream, string(out))
		}
		for i := range int(n) {
			if texts[0][i] != texts[1][i] {
				t.Fatalf("choice %d: unstreamed %q, streamed %q", i, texts[0][i], texts[1][i])
			}
		}
	})
}

// chunks reads a script: a byte with the top bit set is a final chunk for choice b&3
// ("length", or "stop" when bit 6 is set); else bits 6-7 choose the choice and the rest is
// a token id (ids past the word list are special).
func chunks(script []byte, n int) []grpcworker.Chunk {
	var out []grpcworker.Chunk
	for _, b := range script {
		if b&0x80 != 0 {
			reason := "length"
			if b&0x40 != 0 {
				reason = "stop"
			}
			out = append(out, grpcworker.Chunk{Index: uint32(int(b&3) % n), Final: true, FinishReason: reason})
			continue
		}
		out = append(out, grpcworker.Chunk{Index: uint32(int(b>>6) % n), TokenIDs: []uint32{uint32(b & 0x3f % 12)}})
	}
	return out
}

// collect checks an answer's JSON and returns each choice's text.
func collect(t *testing.T, k Kind, stream bool, out string) map[int]string {
	texts := map[int]string{}
	type choice struct {
		Index   int     `json:"index"`
		Text    *string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
	}
	if !stream {
		if k == Generate {
			var one struct {
				Text  string `json:"text"`
				Index int    `json:"index"`
			}
			var many []struct {
				Text  string `json:"text"`
				Index int    `json:"index"`
			}
			if json.Unmarshal([]byte(out), &one) == nil {
				texts[0] = one.Text
			} else if err := json.Unmarshal([]byte(out), &many); err == nil {
				for _, m := range many {
					texts[m.Index] = m.Text
				}
			} else {
				t.Fatalf("invalid /generate body %s: %v", out, err)
			}
			return texts
		}
		var resp struct{ Choices []choice }
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("invalid body %s: %v", out, err)
		}
		for _, c := range resp.Choices {
			if c.Text != nil {
				texts[c.Index] = *c.Text
			} else {
				texts[c.Index] = c.Message.Content
			}
		}
		return texts
	}
	if !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("no [DONE] at the end: %q", out)
	}
	for _, ev := range strings.Split(strings.TrimSuffix(out, "data: [DONE]\n\n"), "\n\n") {
		if ev == "" {
			continue
		}
		p, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("not an event: %q", ev)
		}
		if k == Generate {
			var g struct {
				Text  string `json:"text"`
				Index int    `json:"index"`
			}
			if err := json.Unmarshal([]byte(p), &g); err != nil {
				t.Fatalf("invalid event %s: %v", p, err)
			}
			texts[g.Index] = g.Text // cumulative
			continue
		}
		var c struct{ Choices []choice }
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("invalid event %s: %v", p, err)
		}
		for _, ch := range c.Choices {
			switch {
			case ch.Text != nil:
				texts[ch.Index] += *ch.Text
			case ch.Delta.Content != nil:
				texts[ch.Index] += *ch.Delta.Content
			}
		}
	}
	return texts
}
