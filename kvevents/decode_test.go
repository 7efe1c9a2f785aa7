package kvevents

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/smg-go/smg/kvevents/kvindex"
)

func TestDecodeBothEncodings(t *testing.T) {
	for _, enc := range []encoding{arrays, maps} {
		for _, rank := range []int{-1, 3} {
			payload := encodeBatch(t, enc, 1733400000.25, rank, sampleEvents())
			var b Batch
			if err := NewDecoder().Decode(payload, &b); err != nil {
				t.Fatalf("encoding %d rank %d: %v", enc, rank, err)
			}
			if b.TS != 1733400000.25 || b.HasDPRank != (rank >= 0) || (rank >= 0 && b.DPRank != rank) {
				t.Fatalf("encoding %d: ts %v rank %d/%v", enc, b.TS, b.DPRank, b.HasDPRank)
			}
			want := sampleEvents()
			if len(b.Events) != len(want) {
				t.Fatalf("encoding %d: %d events, want %d", enc, len(b.Events), len(want))
			}
			for i, w := range want {
				got := b.Events[i]
				w := w.Event
				if w.BlockHashes == nil {
					w.BlockHashes = got.BlockHashes[:0]
				}
				if w.TokenIDs == nil {
					w.TokenIDs = got.TokenIDs[:0]
				}
				if !reflect.DeepEqual(got, w) {
					t.Fatalf("encoding %d event %d:\n got %+v\nwant %+v", enc, i, got, w)
				}
			}
		}
	}
}

func TestDecodeByteHashes(t *testing.T) {
	a, p := make([]byte, 32), make([]byte, 32)
	a[0], p[0] = 1, 2
	for _, enc := range []encoding{arrays, maps} {
		evs := []testEvent{
			{Event: Event{Kind: Stored, TokenIDs: []uint32{1, 2}, BlockSize: 2}, hashBytes: [][]byte{a}, parentB: p},
			{Event: Event{Kind: Removed}, hashBytes: [][]byte{a}},
		}
		var b Batch
		if err := NewDecoder().Decode(encodeBatch(t, enc, 1, -1, evs), &b); err != nil {
			t.Fatal(err)
		}
		st, rm := b.Events[0], b.Events[1]
		if st.BlockHashes[0] != FoldHash(a) || !st.HasParent || st.ParentHash != FoldHash(p) || rm.BlockHashes[0] != FoldHash(a) {
			t.Fatalf("encoding %d: byte hashes decoded as %+v / %+v", enc, st, rm)
		}
	}
}

// TestDecodeReusesBatch decodes a small batch after a large one: no event of the first leaks.
func TestDecodeReusesBatch(t *testing.T) {
	d := NewDecoder()
	var b Batch
	if err := d.Decode(encodeBatch(t, maps, 1, 0, sampleEvents()), &b); err != nil {
		t.Fatal(err)
	}
	small := []testEvent{{Event: Event{Kind: Removed, BlockHashes: []uint64{3}}}}
	if err := d.Decode(encodeBatch(t, arrays, 2, -1, small), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Events) != 1 || b.HasDPRank || len(b.Events[0].BlockHashes) != 1 || b.Events[0].Medium != "" {
		t.Fatalf("reused batch: %+v", b)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := encodeBatch(t, arrays, 1, -1, sampleEvents())
	for name, payload := range map[string][]byte{
		"empty":            {},
		"truncated":        good[:len(good)/2],
		"trailing bytes":   append(append([]byte{}, good...), 0x01),
		"not a batch":      {0x05},
		"huge array claim": {0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff},
		"unknown type":     encodeRaw(t, []any{1.0, []any{[]any{"BlockMoved", []any{1}}}}),
		"negative token":   encodeRaw(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{-1}, 1, nil}}}),
		"hash is a float":  encodeRaw(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1.5}}}}),
		"deep nesting":     deepNesting(100),
		"map without type": encodeRaw(t, map[string]any{"ts": 1.0, "events": []any{map[string]any{"block_hashes": []any{1}}}}),
	} {
		var b Batch
		if err := NewDecoder().Decode(payload, &b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

// deepNesting is a batch whose unknown trailing field nests n arrays.
func deepNesting(n int) []byte {
	p := []byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x91}
	for range n {
		p = append(p, 0x91)
	}
	return append(p, 0x01)
}

func TestParseFrames(t *testing.T) {
	seq := binary.BigEndian.AppendUint64(nil, 77)
	topic, s, payload, err := ParseFrames([][]byte{[]byte("kv"), seq, {0x90}})
	if err != nil || string(topic) != "kv" || s != 77 || len(payload) != 1 {
		t.Fatalf("ParseFrames = %q %d %v %v", topic, s, payload, err)
	}
	for _, frames := range [][][]byte{nil, {seq, {1}}, {{}, {1, 2}, {1}}, {{}, seq, {1}, {2}}} {
		if _, _, _, err := ParseFrames(frames); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseFrames(%v) err %v", frames, err)
		}
	}
}

// BenchmarkDecodeApply decodes a vLLM-shaped batch (map encoding, 16 events each storing one
// block of 16 tokens on its parent, sha256-sized byte hashes) and applies it to an index:
// events/s is the consumer's throughput on one core.
func BenchmarkDecodeApply(b *testing.B) {
	idx, _ := kvindex.New(kvindex.DefaultConfig())
	sink := IndexSink{Index: idx, Holder: idx.Holder("w")}
	const perBatch = 16
	d := NewDecoder()
	var batch Batch
	var payloads [][]byte
	for i := range 64 {
		var evs []testEvent
		for j := range perBatch {
			h := make([]byte, 32)
			binary.BigEndian.PutUint64(h, uint64(i*perBatch+j+1))
			ev := testEvent{Event: Event{Kind: Stored, BlockSize: 16, Medium: "GPU"}, hashBytes: [][]byte{h}}
			for k := range 16 {
				ev.TokenIDs = append(ev.TokenIDs, uint32(i*perBatch*16+j*16+k))
			}
			evs = append(evs, ev)
		}
		payloads = append(payloads, encodeBatch(b, maps, 1, 0, evs))
	}
	b.ResetTimer()
	for i := range b.N {
		if err := d.Decode(payloads[i%len(payloads)], &batch); err != nil {
			b.Fatal(err)
		}
		sink.Apply(&batch)
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "events/s")
}
