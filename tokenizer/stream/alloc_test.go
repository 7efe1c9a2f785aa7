package stream

import (
	"runtime"
	"testing"
)

// A mixed stream: words, split emoji and CJK, specials, a held stop prefix.
var benchIDs = ids(fHello, fWorld, fBang, fF0, f9F, f98, f80, fSpace, fE4, fBD, fA0, fIMEnd,
	fST, fA, fC3, fA9, fNL, fAB, fWorld, fHello)

func TestStepAllocs(t *testing.T) {
	f := newFake()
	opts := &Options{Stop: []string{"STOP", "你好"}, EOSTokenIDs: ids(fEOS), StopTokenIDs: ids(fIMEnd + 100)}
	d := NewStopDecoder(f, opts)
	s := NewDecodeStream(f, true)
	dst := make([]byte, 0, 1024)
	var emitted int
	allocs := testing.AllocsPerRun(100, func() {
		d.Reset(f, opts)
		s.Reset(f, true)
		dst = dst[:0]
		for _, id := range benchIDs {
			dst, _ = d.Step(dst, id)
			dst = s.Step(dst, id)
		}
		dst, _ = d.Flush(dst)
		dst = s.Flush(dst)
		emitted = len(dst)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per stream after warm-up, want 0", allocs)
	}
	if emitted == 0 {
		t.Fatal("nothing was emitted")
	}
}

func benchStop(b *testing.B, dec Decoder, opts *Options, in []uint32) {
	d := NewStopDecoder(dec, opts)
	dst := make([]byte, 0, 4096)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPU()
	n := 0
	for b.Loop() {
		if n%len(in) == 0 {
			// A new choice every len(in) tokens, like a pooled decoder.
			d.Reset(dec, opts)
			dst = dst[:0]
		}
		dst, _ = d.Step(dst, in[n%len(in)])
		n++
	}
	cpu := threadCPU() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
	b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/token")
}

func BenchmarkFakeStep(b *testing.B) {
	benchStop(b, newFake(), &Options{EOSTokenIDs: ids(fEOS)}, benchIDs)
}

func BenchmarkFakeStepStopStrings(b *testing.B) {
	benchStop(b, newFake(), &Options{Stop: []string{"STOP", "你好", "\n\n"}, EOSTokenIDs: ids(fEOS)}, benchIDs)
}
