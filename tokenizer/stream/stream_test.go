package stream

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func ids(v ...uint32) []uint32 { return v }

// steps returns the chunk each Step emitted.
func steps(s *DecodeStream, in []uint32) []string {
	var out []string
	for _, id := range in {
		out = append(out, string(s.Step(nil, id)))
	}
	return out
}

func eqChunks(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
		t.Fatalf("chunks %q, want %q", got, want)
	}
}

func TestDecodeStreamASCII(t *testing.T) {
	s := NewDecodeStream(newFake(), true)
	eqChunks(t, steps(s, ids(fHello, fWorld, fBang, fNL)), []string{"Hello", " world", "!", "\n"})
	if s.Pending() {
		t.Fatal("nothing should be pending")
	}
	if got := s.Flush(nil); len(got) != 0 {
		t.Fatalf("Flush = %q, want nothing", got)
	}
}

func TestDecodeStreamSplitUTF8(t *testing.T) {
	s := NewDecodeStream(newFake(), true)
	// 😀 in four byte tokens, then 你 in three, then é in two.
	in := ids(fA, fF0, f9F, f98, f80, fE4, fBD, fA0, fC3, fA9, fB)
	eqChunks(t, steps(s, in), []string{"a", "", "", "", "😀", "", "", "你", "", "é", "b"})
}

func TestDecodeStreamFlushIncomplete(t *testing.T) {
	f := newFake()
	s := NewDecodeStream(f, true)
	in := ids(fHello, fF0, f9F)
	got := string(s.Step(nil, in[0])) + string(s.Step(nil, in[1])) + string(s.Step(nil, in[2]))
	if got != "Hello" || !s.Pending() {
		t.Fatalf("before Flush %q pending=%v, want Hello and pending", got, s.Pending())
	}
	got += string(s.Flush(nil))
	if want := f.text(in, true); got != want || want != "Hello\ufffd\ufffd" {
		t.Fatalf("after Flush %q, want %q", got, want)
	}
	// The stream goes on after a Flush with the same context.
	if c := string(s.Step(nil, fBang)); c != "!" {
		t.Fatalf("Step after Flush = %q, want !", c)
	}
}

func TestDecodeStreamRawInvalidBytes(t *testing.T) {
	// A decoder that returns raw incomplete bytes instead of U+FFFD must
	// not make the stream emit half a character.
	f := newFake()
	f.raw = true
	s := NewDecodeStream(f, true)
	eqChunks(t, steps(s, ids(fE4, fBD, fA0, fC3, fA9)), []string{"", "", "你", "", "é"})
}

func TestDecodeStreamLiteralReplacementChar(t *testing.T) {
	// A token that is U+FFFD itself waits for the next token (it looks like
	// an incomplete sequence) and is never lost.
	f := newFake()
	s := NewDecodeStream(f, true)
	eqChunks(t, steps(s, ids(fA, fFFFD, fB)), []string{"a", "", "\ufffdb"})
	s.Reset(f, true)
	got := string(s.Step(nil, fFFFD)) + string(s.Flush(nil))
	if got != "\ufffd" {
		t.Fatalf("flushed %q, want U+FFFD", got)
	}
}

func TestDecodeStreamSpecialTokens(t *testing.T) {
	f := newFake()
	s := NewDecodeStream(f, true)
	eqChunks(t, steps(s, ids(fBOS, fHello, fIMEnd, fBang, fEOS)), []string{"", "Hello", "", "!", ""})
	s.Reset(f, false)
	eqChunks(t, steps(s, ids(fBOS, fHello, fIMEnd, fEOS)), []string{"<s>", "Hello", "<|im_end|>", "</s>"})
}

func TestDecodeStreamSkippedSpecialsStayOutOfWindow(t *testing.T) {
	f := newFake()
	s := NewDecodeStream(f, true)
	s.Step(nil, fA)
	for range 100 {
		if c := s.Step(nil, fEOS); len(c) != 0 {
			t.Fatalf("skipped special emitted %q", c)
		}
	}
	if len(s.ids) != 1 || s.Pending() {
		t.Fatalf("window %v grew with skipped specials", s.ids)
	}
	// Without IsSpecial the ids stay in the window and the text is the same.
	p := NewDecodeStream(plainDecoder{f}, true)
	in := ids(fA, fEOS, fEOS, fE4, fIMEnd, fBD, fA0, fBOS)
	got := strings.Join(steps(p, in), "") + string(p.Flush(nil))
	if got != "a你" {
		t.Fatalf("plain decoder streamed %q, want a你", got)
	}
}

func TestDecodeStreamPrefixContext(t *testing.T) {
	// With a decoder that strips the leading space, decoding each token
	// alone would lose the spaces; the prefix window keeps them.
	f := newFake()
	f.stripLead = true
	s := NewDecodeStream(f, true)
	in := ids(fSpHello, fWorld, fSpace, fSpHello)
	got := steps(s, in)
	eqChunks(t, got, []string{"Hello", " world", " ", " Hello"})
	if j := strings.Join(got, ""); j != f.text(in, true) {
		t.Fatalf("joined %q != Decode %q", j, f.text(in, true))
	}
}

// randomIDs draws ids biased towards byte tokens so that split characters,
// invalid sequences and specials all occur.
func randomIDs(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(r.IntN(fVocab))
	}
	return out
}

func TestDecodeStreamMatchesDecodeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []struct {
		name       string
		strip, raw bool
		skip       bool
	}{{"bytes", false, false, true}, {"keep-special", false, false, false}, {"strip-lead", true, false, true}, {"raw", false, true, true}} {
		f := newFake()
		f.stripLead, f.raw = mode.strip, mode.raw
		s := NewDecodeStream(f, mode.skip)
		for iter := range 3000 {
			in := randomIDs(r, r.IntN(40))
			var dec Decoder = f
			if iter%2 == 1 {
				dec = plainDecoder{f}
			}
			s.Reset(dec, mode.skip)
			var out []byte
			for _, id := range in {
				out = s.Step(out, id)
			}
			out = s.Flush(out)
			if want := f.text(in, mode.skip); string(out) != want {
				t.Fatalf("%s #%d ids %v: stream %q, Decode %q", mode.name, iter, in, out, want)
			}
		}
	}
}

func TestDecodeStreamNeverEmitsHalfCharacter(t *testing.T) {
	// Only valid characters (no byte that is invalid on its own) so any
	// U+FFFD in a chunk would be the stream's fault.
	valid := ids(fHello, fWorld, fNi, fEacute, fA, fSpace,
		fF0, f9F, f98, f80, fE4, fBD, fA0, fC3, fA9) // sequences built below stay valid
	r := rand.New(rand.NewPCG(3, 4))
	f := newFake()
	s := NewDecodeStream(f, true)
	for range 2000 {
		var in []uint32
		for range r.IntN(20) {
			switch id := valid[r.IntN(len(valid))]; id {
			case fF0, f9F, f98, f80:
				in = append(in, fF0, f9F, f98, f80)
			case fE4, fBD, fA0:
				in = append(in, fE4, fBD, fA0)
			case fC3, fA9:
				in = append(in, fC3, fA9)
			default:
				in = append(in, id)
			}
		}
		s.Reset(f, true)
		for _, id := range in {
			if c := s.Step(nil, id); strings.ContainsRune(string(c), '\ufffd') || !isValid(c) {
				t.Fatalf("ids %v: chunk %q has a broken character", in, c)
			}
		}
		if s.Pending() {
			t.Fatalf("ids %v: complete characters left pending", in)
		}
	}
}

func isValid(b []byte) bool { return strings.ToValidUTF8(string(b), "\x00") == string(b) }
