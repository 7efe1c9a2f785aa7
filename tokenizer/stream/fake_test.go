package stream

import (
	"bytes"
	"unicode/utf8"
)

// fakeDecoder is a byte-level decoder like Llama 3 / Qwen: each id maps to
// bytes, special ids are dropped when skipping, and invalid UTF-8 becomes
// one U+FFFD per bad byte. stripLead mimics SentencePiece decoders, which
// drop the leading space of the decoded text: that needs the prefix window.
type fakeDecoder struct {
	vocab     [][]byte
	special   []bool
	stripLead bool
	raw       bool // keep invalid bytes instead of U+FFFD, like a decoder that does not sanitise
}

const (
	fBOS = iota
	fEOS
	fIMEnd
	fHello
	fWorld
	fBang
	fSpace
	fNL
	fA
	fB
	fC
	fAB
	fSTOP
	fST
	fOP
	fNi // 你
	fE4 // first byte of 你
	fBD // second byte of 你
	fA0 // third byte of 你
	fF0 // 😀 = F0 9F 98 80
	f9F //
	f98 //
	f80 //
	fEacute
	fC3 // first byte of é
	fA9 // second byte of é
	fFFFD
	fFF // never valid in UTF-8
	fSpHello
	fVocab
)

var fakeTexts = [fVocab]string{
	fBOS: "<s>", fEOS: "</s>", fIMEnd: "<|im_end|>",
	fHello: "Hello", fWorld: " world", fBang: "!", fSpace: " ", fNL: "\n",
	fA: "a", fB: "b", fC: "c", fAB: "ab", fSTOP: "STOP", fST: "ST", fOP: "OP",
	fNi: "你", fE4: "\xe4", fBD: "\xbd", fA0: "\xa0",
	fF0: "\xf0", f9F: "\x9f", f98: "\x98", f80: "\x80",
	fEacute: "é", fC3: "\xc3", fA9: "\xa9", fFFFD: "\ufffd", fFF: "\xff",
	fSpHello: " Hello",
}

func newFake() *fakeDecoder {
	f := &fakeDecoder{special: make([]bool, fVocab)}
	for _, t := range fakeTexts {
		f.vocab = append(f.vocab, []byte(t))
	}
	f.special[fBOS], f.special[fEOS], f.special[fIMEnd] = true, true, true
	return f
}

func (f *fakeDecoder) Decode(dst []byte, ids []uint32, skipSpecial bool) []byte {
	start := len(dst)
	for _, id := range ids {
		if skipSpecial && f.special[id] {
			continue
		}
		dst = append(dst, f.vocab[id]...)
	}
	if f.stripLead && len(dst) > start && dst[start] == ' ' {
		dst = append(dst[:start], dst[start+1:]...)
	}
	if f.raw {
		return dst
	}
	if utf8.Valid(dst[start:]) {
		return dst
	}
	// Sanitise without allocating once dst has room: write the clean copy
	// after the raw bytes, then move it down.
	raw := dst[start:]
	end := len(dst)
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, raw[i:i+n]...)
		}
		i += n
	}
	n := copy(dst[start:], dst[end:])
	return dst[:start+n]
}

func (f *fakeDecoder) IsSpecial(id uint32) bool { return f.special[id] }

// plainDecoder hides IsSpecial, so DecodeStream keeps special ids in the
// window.
type plainDecoder struct{ f *fakeDecoder }

func (p plainDecoder) Decode(dst []byte, ids []uint32, skipSpecial bool) []byte {
	return p.f.Decode(dst, ids, skipSpecial)
}

func (f *fakeDecoder) text(ids []uint32, skipSpecial bool) string {
	return string(f.Decode(nil, ids, skipSpecial))
}

// referenceStop is the non-streaming answer: Decode of the ids up to the
// first stop token (including it under NoStopTrim), cut at the stop string
// that ends first (earliest start on a tie).
func referenceStop(dec Decoder, ids []uint32, o *Options) (string, Result) {
	res := Result{}
	n := len(ids)
	for i, id := range ids {
		if contains(o.StopTokenIDs, id) || (!o.IgnoreEOS && contains(o.EOSTokenIDs, id)) {
			n = i
			if o.NoStopTrim {
				n = i + 1
			}
			res = Result{Finish: StopToken, StopToken: id}
			break
		}
	}
	text := dec.Decode(nil, ids[:n], !o.KeepSpecialTokens)
	best, start, end := -1, 0, 0
	for i, s := range o.Stop {
		if s == "" {
			continue
		}
		j := bytes.Index(text, []byte(s))
		if j < 0 {
			continue
		}
		if e := j + len(s); best < 0 || e < end || (e == end && j < start) {
			best, start, end = i, j, e
		}
	}
	if best >= 0 {
		if o.NoStopTrim {
			text = text[:end]
		} else {
			text = text[:start]
		}
		res = Result{Finish: StopString, StopString: o.Stop[best]}
	}
	return string(text), res
}

// runStop streams ids through d one Step at a time and Flushes when no stop
// happened, returning the concatenated output and the final Result.
func runStop(d *StopDecoder, ids []uint32) (string, Result) {
	var out []byte
	var res Result
	for _, id := range ids {
		if out, res = d.Step(out, id); res.Done() {
			break
		}
	}
	if !res.Done() {
		out, res = d.Flush(out)
	}
	return string(out), res
}
