package stream

import (
	"math/rand/v2"
	"testing"
)

type stopStep struct {
	out string
	res Result
}

func stepAll(d *StopDecoder, in []uint32) []stopStep {
	var out []stopStep
	for _, id := range in {
		b, r := d.Step(nil, id)
		out = append(out, stopStep{string(b), r})
	}
	return out
}

func TestStopDecoder(t *testing.T) {
	cont := Result{}
	stopStr := func(s string) Result { return Result{Finish: StopString, StopString: s} }
	stopTok := func(id uint32) Result { return Result{Finish: StopToken, StopToken: id} }
	for _, tc := range []struct {
		name  string
		opts  Options
		in    []uint32
		want  []stopStep
		flush stopStep // Flush after the steps; zero: nothing and the last step's Result
	}{
		{
			name: "no stops passes text through",
			in:   ids(fHello, fWorld),
			want: []stopStep{{"Hello", cont}, {" world", cont}},
		},
		{
			name: "stop string in one token is hidden",
			opts: Options{Stop: []string{"STOP"}},
			in:   ids(fHello, fSTOP, fA),
			want: []stopStep{{"Hello", cont}, {"", stopStr("STOP")}, {"", stopStr("STOP")}},
		},
		{
			name: "stop string across tokens is held then hidden",
			opts: Options{Stop: []string{"STOP"}},
			in:   ids(fA, fST, fOP),
			want: []stopStep{{"a", cont}, {"", cont}, {"", stopStr("STOP")}},
		},
		{
			name:  "held text released when it cannot start the stop string",
			opts:  Options{Stop: []string{"STOP"}},
			in:    ids(fST, fA, fST),
			want:  []stopStep{{"", cont}, {"STa", cont}, {"", cont}},
			flush: stopStep{"ST", cont},
		},
		{
			name: "text before the stop string in the same token is sent",
			opts: Options{Stop: []string{"b"}},
			in:   ids(fAB),
			want: []stopStep{{"a", stopStr("b")}},
		},
		{
			name: "no_stop_trim keeps the stop string",
			opts: Options{Stop: []string{"STOP"}, NoStopTrim: true},
			in:   ids(fA, fST, fOP, fB),
			want: []stopStep{{"a", cont}, {"", cont}, {"STOP", stopStr("STOP")}, {"", stopStr("STOP")}},
		},
		{
			name: "only the part that can start a stop string is held",
			opts: Options{Stop: []string{"abc"}},
			in:   ids(fHello, fA, fB, fA, fC),
			want: []stopStep{{"Hello", cont}, {"", cont}, {"", cont}, {"ab", cont}, {"ac", cont}},
		},
		{
			name: "the stop string that ends first wins",
			opts: Options{Stop: []string{"abc", "b"}},
			in:   ids(fA, fB, fC),
			want: []stopStep{{"", cont}, {"a", stopStr("b")}, {"", stopStr("b")}},
		},
		{
			name: "same end: the earlier start wins",
			opts: Options{Stop: []string{"b", "ab"}},
			in:   ids(fAB),
			want: []stopStep{{"", stopStr("ab")}},
		},
		{
			name: "multibyte stop string split over byte tokens",
			opts: Options{Stop: []string{"你"}},
			in:   ids(fA, fE4, fBD, fA0),
			want: []stopStep{{"a", cont}, {"", cont}, {"", cont}, {"", stopStr("你")}},
		},
		{
			name: "empty stop strings are ignored",
			opts: Options{Stop: []string{""}},
			in:   ids(fA),
			want: []stopStep{{"a", cont}},
		},
		{
			name: "EOS stops and its text is not sent",
			opts: Options{EOSTokenIDs: ids(fEOS)},
			in:   ids(fHello, fEOS, fA),
			want: []stopStep{{"Hello", cont}, {"", stopTok(fEOS)}, {"", stopTok(fEOS)}},
		},
		{
			name: "ignore_eos: EOS is an ordinary (skipped special) token",
			opts: Options{EOSTokenIDs: ids(fEOS), IgnoreEOS: true},
			in:   ids(fHello, fEOS, fA),
			want: []stopStep{{"Hello", cont}, {"", cont}, {"a", cont}},
		},
		{
			name: "stop_token_ids stop even with ignore_eos",
			opts: Options{StopTokenIDs: ids(fBang), IgnoreEOS: true},
			in:   ids(fHello, fBang),
			want: []stopStep{{"Hello", cont}, {"", stopTok(fBang)}},
		},
		{
			name: "no_stop_trim sends a stop token's text",
			opts: Options{StopTokenIDs: ids(fBang), NoStopTrim: true},
			in:   ids(fHello, fBang),
			want: []stopStep{{"Hello", cont}, {"!", stopTok(fBang)}},
		},
		{
			name: "no_stop_trim: a special stop token is still skipped",
			opts: Options{EOSTokenIDs: ids(fIMEnd), NoStopTrim: true},
			in:   ids(fHello, fIMEnd),
			want: []stopStep{{"Hello", cont}, {"", stopTok(fIMEnd)}},
		},
		{
			name: "no_stop_trim with special tokens kept",
			opts: Options{EOSTokenIDs: ids(fIMEnd), NoStopTrim: true, KeepSpecialTokens: true},
			in:   ids(fHello, fIMEnd),
			want: []stopStep{{"Hello", cont}, {"<|im_end|>", stopTok(fIMEnd)}},
		},
		{
			name: "stop token releases held text",
			opts: Options{Stop: []string{"STOP"}, EOSTokenIDs: ids(fEOS)},
			in:   ids(fA, fST, fEOS),
			want: []stopStep{{"a", cont}, {"", cont}, {"ST", stopTok(fEOS)}},
		},
		{
			name: "stop token flushes an incomplete character as Decode would",
			opts: Options{EOSTokenIDs: ids(fEOS)},
			in:   ids(fA, fE4, fEOS),
			want: []stopStep{{"a", cont}, {"", cont}, {"\ufffd", stopTok(fEOS)}},
		},
		{
			name: "stop token text completing a stop string reports the string",
			opts: Options{Stop: []string{"a!"}, StopTokenIDs: ids(fBang), NoStopTrim: true},
			in:   ids(fA, fBang),
			want: []stopStep{{"", cont}, {"a!", stopStr("a!")}},
		},
		{
			name: "special tokens are kept on request",
			opts: Options{KeepSpecialTokens: true},
			in:   ids(fBOS, fA),
			want: []stopStep{{"<s>", cont}, {"a", cont}},
		},
		{
			name:  "flush after a stop sends nothing",
			opts:  Options{Stop: []string{"b"}},
			in:    ids(fA, fB, fST),
			want:  []stopStep{{"a", cont}, {"", stopStr("b")}, {"", stopStr("b")}},
			flush: stopStep{"", stopStr("b")},
		},
		{
			name:  "flush sends pending bytes and checks them",
			opts:  Options{Stop: []string{"\ufffd"}},
			in:    ids(fA, fE4),
			want:  []stopStep{{"a", cont}, {"", cont}},
			flush: stopStep{"", stopStr("\ufffd")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewStopDecoder(newFake(), &tc.opts)
			got := stepAll(d, tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d steps", len(got))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("step %d (id %d): got %+v, want %+v", i, tc.in[i], got[i], tc.want[i])
				}
			}
			if tc.flush == (stopStep{}) {
				tc.flush.res = got[len(got)-1].res
			}
			b, r := d.Flush(nil)
			if f := (stopStep{string(b), r}); f != tc.flush {
				t.Fatalf("Flush: got %+v, want %+v", f, tc.flush)
			}
			if d.Result() != r {
				t.Fatalf("Result() = %+v, want %+v", d.Result(), r)
			}
		})
	}
}

func TestStopDecoderSteps(t *testing.T) {
	d := NewStopDecoder(newFake(), &Options{EOSTokenIDs: ids(fEOS)})
	out, r := d.Steps([]byte("x:"), ids(fHello, fWorld, fEOS, fA))
	if string(out) != "x:Hello world" || r != (Result{Finish: StopToken, StopToken: fEOS}) {
		t.Fatalf("Steps = %q %+v", out, r)
	}
}

func TestStopDecoderResetReuse(t *testing.T) {
	f := newFake()
	d := NewStopDecoder(f, &Options{Stop: []string{"STOP"}, EOSTokenIDs: ids(fEOS)})
	if out, r := runStop(d, ids(fA, fST, fOP)); out != "a" || r.Finish != StopString {
		t.Fatalf("first run %q %+v", out, r)
	}
	// Reset with other options forgets the old stops, held text and state.
	d.Reset(f, nil)
	if out, r := runStop(d, ids(fST, fOP, fEOS, fA)); out != "STOPa" || r.Done() {
		t.Fatalf("after Reset %q %+v", out, r)
	}
	// The options are copied: changing the caller's slices later has no effect.
	o := Options{Stop: []string{"a"}, StopTokenIDs: ids(fB)}
	d.Reset(f, &o)
	o.Stop[0], o.StopTokenIDs[0] = "zzz", fC
	if out, r := runStop(d, ids(fC, fB)); out != "c" || r != (Result{Finish: StopToken, StopToken: fB}) {
		t.Fatalf("options not copied: %q %+v", out, r)
	}
}

// TestStopDecoderMatchesReference compares streaming against the
// non-streaming definition for random ids and stop settings.
func TestStopDecoderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	stopPool := []string{"STOP", "ab", "b", "a!", "你", "😀", "\ufffd", "o w", "lo", "OPS", "ba", "!\n", "Hello world"}
	f := newFake()
	d := NewStopDecoder(f, nil)
	for iter := range 20000 {
		var o Options
		for range r.IntN(4) {
			o.Stop = append(o.Stop, stopPool[r.IntN(len(stopPool))])
		}
		for range r.IntN(3) {
			o.StopTokenIDs = append(o.StopTokenIDs, uint32(r.IntN(fVocab)))
		}
		o.EOSTokenIDs = ids(fEOS, fIMEnd)
		o.IgnoreEOS = r.IntN(2) == 0
		o.NoStopTrim = r.IntN(2) == 0
		o.KeepSpecialTokens = r.IntN(4) == 0
		in := randomIDs(r, r.IntN(30))
		d.Reset(f, &o)
		got, gotRes := runStop(d, in)
		want, wantRes := referenceStop(f, in, &o)
		if got != want || gotRes != wantRes {
			t.Fatalf("#%d ids %v opts %+v:\nstream    %q %+v\nreference %q %+v", iter, in, o, got, gotRes, want, wantRes)
		}
	}
}
