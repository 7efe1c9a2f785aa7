package stream

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/smg-go/smg/tokenizer"
)

var realFamilies = []string{"qwen3", "llama3"}

var (
	realMu  sync.Mutex
	realTok = map[string]*tokenizer.Tokenizer{}
	realGld = map[string][]goldenLine{}
)

func loadReal(t testing.TB, name string) *tokenizer.Tokenizer {
	t.Helper()
	realMu.Lock()
	defer realMu.Unlock()
	if tk := realTok[name]; tk != nil {
		return tk
	}
	d := os.Getenv("SMG_TOKENIZER_DATA")
	if d == "" {
		home, _ := os.UserHomeDir()
		d = filepath.Join(home, ".cache/smg-tokenizers/v1")
	}
	dir := filepath.Join(d, name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("tokenizer data missing in %s (run make tools): %v", dir, err)
	}
	tk, err := loadDecodeOnly(dir)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	realTok[name] = tk
	return tk
}

// loadDecodeOnly loads the tokenizer with its pre-tokenizer removed: the
// stream only needs Decode, which does not use it, and so these tests do
// not depend on which split patterns the encoder supports.
func loadDecodeOnly(dir string) (*tokenizer.Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(tj, &m); err != nil {
		return nil, err
	}
	m["pre_tokenizer"] = json.RawMessage("null")
	// Reassemble by hand: json.Marshal would re-validate megabytes of vocab.
	var b bytes.Buffer
	b.WriteByte('{')
	for k, v := range m {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", k)
		b.Write(v)
	}
	b.WriteByte('}')
	tj = b.Bytes()
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	gen, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return tokenizer.LoadJSON(tj, cfg, gen)
}

type goldenLine struct {
	Text        string   `json:"text"`
	IDs         []uint32 `json:"ids"`
	IDsSpecial  []uint32 `json:"ids_special"`
	Decoded     string   `json:"decoded"`      // Hugging Face decode(ids_special, skip_special_tokens=False)
	DecodedSkip string   `json:"decoded_skip"` // Hugging Face decode(ids_special, skip_special_tokens=True)
}

// golden returns the family's golden corpus lines.
func golden(t testing.TB, name string) []goldenLine {
	t.Helper()
	realMu.Lock()
	defer realMu.Unlock()
	if g := realGld[name]; g != nil {
		return g
	}
	f, err := os.Open(filepath.Join("..", "testdata", "golden", name+".jsonl.gz"))
	if err != nil {
		t.Fatalf("golden corpus: %v", err)
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
	realGld[name] = out
	return out
}

// goldenIDs returns the "ids_special" list of every corpus line (the
// "ids" lists are the same without the special tokens).
func goldenIDs(t testing.TB, name string) [][]uint32 {
	var out [][]uint32
	for _, l := range golden(t, name) {
		out = append(out, l.IDsSpecial)
	}
	return out
}

// streamAll streams in through s into out, Flush last, and returns out
// with the end offset of each step's chunk (len(in)+1 of them).
func streamAll(s *DecodeStream, in []uint32, out []byte, ends []int) ([]byte, []int) {
	out, ends = out[:0], ends[:0]
	for _, id := range in {
		out = s.Step(out, id)
		ends = append(ends, len(out))
	}
	out = s.Flush(out)
	return out, append(ends, len(out))
}

// TestRealGoldenStreamEqualsDecode: token by token, every golden id list
// concatenates to exactly Decode(all) and to Hugging Face's decode of it,
// with and without special tokens,
// and when Decode(all) is valid text no chunk holds U+FFFD or half a
// character.
func TestRealGoldenStreamEqualsDecode(t *testing.T) {
	for _, name := range realFamilies {
		t.Run(name, func(t *testing.T) {
			tk := loadReal(t, name)
			lists := goldenIDs(t, name)
			gl := golden(t, name)
			s := NewDecodeStream(tk, true)
			var out, want []byte
			var ends []int
			split := 0
			for _, skip := range []bool{true, false} {
				for i, in := range lists {
					s.Reset(tk, skip)
					out, ends = streamAll(s, in, out, ends)
					want = tk.Decode(want[:0], in, skip)
					if string(out) != string(want) {
						t.Fatalf("skip=%v list %d ids %v:\nstream %q\nDecode %q", skip, i, in, out, want)
					}
					hf := gl[i].Decoded
					if skip {
						hf = gl[i].DecodedSkip
					}
					if string(out) != hf {
						t.Fatalf("skip=%v list %d ids %v:\nstream      %q\nHugging Face %q", skip, i, in, out, hf)
					}
					if bytes.ContainsRune(want, utf8.RuneError) {
						continue
					}
					for j, start := 0, 0; j < len(ends); start, j = ends[j], j+1 {
						c := out[start:ends[j]]
						if !utf8.Valid(c) || bytes.ContainsRune(c, utf8.RuneError) {
							t.Fatalf("skip=%v list %d: chunk %d %q is broken", skip, i, j, c)
						}
						if j < len(in) && len(c) == 0 && !tk.IsSpecial(in[j]) {
							split++
						}
					}
				}
			}
			// The corpus has CJK and emoji split over byte tokens; make sure
			// the check above saw them.
			if split == 0 {
				t.Fatal("no token waited for the next one: split characters were not exercised")
			}
		})
	}
}

// TestRealRandomIDsStreamEqualsDecode: any id sequence, including ones that
// are not valid text, streams to exactly Decode(all).
func TestRealRandomIDsStreamEqualsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, name := range realFamilies {
		tk := loadReal(t, name)
		// Ids of golden lines with CJK and emoji (byte tokens), EOS ids,
		// plus fully random ids.
		var pool []uint32
		for _, l := range golden(t, name) {
			if len(l.Text) != utf8.RuneCountInString(l.Text) {
				pool = append(pool, l.IDs...)
			}
		}
		pool = append(pool, tk.EOSTokenIDs()...)
		s := NewDecodeStream(tk, true)
		var out []byte
		var ends []int
		for iter := range 3000 {
			in := make([]uint32, r.IntN(24))
			for i := range in {
				if r.IntN(2) == 0 {
					in[i] = pool[r.IntN(len(pool))]
				} else {
					in[i] = uint32(r.IntN(tk.VocabSize()))
				}
			}
			skip := iter%2 == 0
			s.Reset(tk, skip)
			out, ends = streamAll(s, in, out, ends)
			if want := tk.Decode(nil, in, skip); string(out) != string(want) {
				t.Fatalf("%s skip=%v ids %v:\nstream %q\nDecode %q", name, skip, in, out, want)
			}
		}
	}
}

// TestRealSplitCharacters: every golden text with emoji (outside the BMP)
// or CJK streams without U+FFFD or half characters to exactly Hugging
// Face's decode, and characters really are split over byte tokens.
func TestRealSplitCharacters(t *testing.T) {
	for _, name := range realFamilies {
		tk := loadReal(t, name)
		s := NewDecodeStream(tk, true)
		lines, waited := 0, 0
		for _, l := range golden(t, name) {
			wide := false
			for _, r := range l.Text {
				wide = wide || r > 0xFFFF || (r >= 0x4E00 && r <= 0x9FFF)
			}
			if !wide || strings.ContainsRune(l.DecodedSkip, utf8.RuneError) {
				continue
			}
			lines++
			s.Reset(tk, true)
			var got []byte
			for _, id := range l.IDsSpecial {
				c := s.Step(nil, id)
				if strings.ContainsRune(string(c), utf8.RuneError) || !utf8.Valid(c) {
					t.Fatalf("%s %q: chunk %q is broken", name, l.Text, c)
				}
				if len(c) == 0 && !tk.IsSpecial(id) {
					waited++
				}
				got = append(got, c...)
			}
			if f := s.Flush(nil); len(f) != 0 {
				t.Fatalf("%s %q: Flush gave %q after complete text", name, l.Text, f)
			}
			if string(got) != l.DecodedSkip {
				t.Fatalf("%s: streamed %q, Hugging Face decode %q", name, got, l.DecodedSkip)
			}
		}
		if lines < 500 || waited < 100 {
			t.Fatalf("%s: %d lines, %d tokens waiting: split characters not exercised", name, lines, waited)
		}
	}
}

// TestRealStopDecoder compares streaming with stop rules against the
// non-streaming definition on golden ids, with stop strings taken from the
// decoded text and the tokenizer's EOS ids.
func TestRealStopDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, name := range realFamilies {
		tk := loadReal(t, name)
		if len(tk.EOSTokenIDs()) == 0 {
			t.Fatalf("%s has no EOS ids", name)
		}
		lists := goldenIDs(t, name)
		d := NewStopDecoder(tk, nil)
		stopped := 0
		for i, in := range lists {
			text := []rune(string(tk.Decode(nil, in, true)))
			var o Options
			for range r.IntN(3) {
				if len(text) == 0 {
					break
				}
				a := r.IntN(len(text))
				b := min(len(text), a+1+r.IntN(4))
				o.Stop = append(o.Stop, string(text[a:b]))
			}
			o.EOSTokenIDs = tk.EOSTokenIDs()
			o.IgnoreEOS = r.IntN(3) == 0
			o.NoStopTrim = r.IntN(2) == 0
			o.KeepSpecialTokens = r.IntN(3) == 0
			if len(in) > 0 && r.IntN(4) == 0 {
				o.StopTokenIDs = []uint32{in[r.IntN(len(in))]}
			}
			d.Reset(tk, &o)
			got, gotRes := runStop(d, in)
			want, wantRes := referenceStop(tk, in, &o)
			if got != want || gotRes != wantRes {
				t.Fatalf("%s list %d ids %v opts %+v:\nstream    %q %+v\nreference %q %+v", name, i, in, o, got, gotRes, want, wantRes)
			}
			if gotRes.Done() {
				stopped++
			}
		}
		if stopped < len(lists)/4 {
			t.Fatalf("%s: only %d of %d runs stopped; stop rules barely exercised", name, stopped, len(lists))
		}
	}
}

// TestRealStepAllocs: with the real tokenizer a warm decoder allocates
// nothing per token on text whose tokens are whole characters.
func TestRealStepAllocs(t *testing.T) {
	for _, name := range realFamilies {
		tk := loadReal(t, name)
		// ASCII golden texts: every token is whole characters.
		var in []uint32
		for _, l := range golden(t, name) {
			if len(in) < 2000 && len(l.Text) == utf8.RuneCountInString(l.Text) {
				in = append(in, l.IDs...)
			}
		}
		opts := &Options{Stop: []string{"</tag>", "<<END>>"}, StopTokenIDs: []uint32{uint32(tk.VocabSize())}}
		d := NewStopDecoder(tk, opts)
		dst := make([]byte, 0, 1024)
		allocs := testing.AllocsPerRun(50, func() {
			d.Reset(tk, opts)
			dst = dst[:0]
			for _, id := range in {
				dst, _ = d.Step(dst, id)
			}
			dst, _ = d.Flush(dst)
		})
		if allocs != 0 {
			t.Fatalf("%s: %v allocations per stream, want 0", name, allocs)
		}
		if want, _ := referenceStop(tk, in, opts); string(dst) != want || len(want) < 1000 {
			t.Fatalf("%s: streamed %q, want %q", name, dst, want)
		}
	}
}

func benchReal(b *testing.B, name string, opts *Options) {
	tk := loadReal(b, name)
	var in []uint32
	for _, l := range goldenIDs(b, name) {
		in = append(in, l...)
	}
	if opts.EOSTokenIDs == nil {
		opts.EOSTokenIDs = tk.EOSTokenIDs()
	}
	opts.IgnoreEOS = true // the corpus is one long stream
	benchStop(b, tk, opts, in)
}

func BenchmarkRealStep(b *testing.B) {
	for _, name := range realFamilies {
		b.Run(name, func(b *testing.B) { benchReal(b, name, &Options{}) })
		b.Run(name+"/stops", func(b *testing.B) {
			benchReal(b, name, &Options{Stop: []string{"</answer>", "\n\nUser:", "STOP"}})
		})
	}
}
