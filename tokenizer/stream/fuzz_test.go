package stream

import (
	"strings"
	"testing"
)

// FuzzStopDecoder: for any ids and stop strings, the streamed text (steps
// plus Flush) equals the non-streaming answer, with the same Result, and
// the bare DecodeStream reproduces Decode exactly.
func FuzzStopDecoder(f *testing.F) {
	f.Add([]byte{fHello, fST, fOP, fA}, "STOP", "", uint8(0))
	f.Add([]byte{fA, fF0, f9F, f98, f80, fEOS}, "😀", "a", uint8(1))
	f.Add([]byte{fE4, fBD, fIMEnd, fA0, fFF}, "\ufffd", "你", uint8(6))
	f.Add([]byte{fAB, fAB, fC}, "bab", "ba", uint8(3))
	f.Fuzz(func(t *testing.T, raw []byte, stop1, stop2 string, flags uint8) {
		in := make([]uint32, len(raw))
		for i, b := range raw {
			in[i] = uint32(b) % fVocab
		}
		o := Options{
			Stop:              []string{stop1, stop2},
			EOSTokenIDs:       ids(fEOS),
			IgnoreEOS:         flags&1 != 0,
			NoStopTrim:        flags&2 != 0,
			KeepSpecialTokens: flags&4 != 0,
		}
		if flags&8 != 0 {
			o.StopTokenIDs = ids(uint32(flags>>4) % fVocab)
		}
		dec := newFake()
		dec.stripLead = flags&16 != 0 && flags&8 == 0
		var sd Decoder = dec
		if flags&32 != 0 {
			sd = plainDecoder{dec} // special ids stay in the window
		}
		d := NewStopDecoder(sd, &o)
		got, gotRes := runStop(d, in)
		want, wantRes := referenceStop(dec, in, &o)
		if got != want || gotRes != wantRes {
			t.Fatalf("ids %v opts %+v:\nstream    %q %+v\nreference %q %+v", in, o, got, gotRes, want, wantRes)
		}
		s := NewDecodeStream(sd, !o.KeepSpecialTokens)
		var b strings.Builder
		for _, id := range in {
			b.Write(s.Step(nil, id))
		}
		b.Write(s.Flush(nil))
		if w := dec.text(in, !o.KeepSpecialTokens); b.String() != w {
			t.Fatalf("ids %v: DecodeStream %q, Decode %q", in, b.String(), w)
		}
	})
}
