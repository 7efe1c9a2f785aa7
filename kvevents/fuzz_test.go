package kvevents

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func encodeRaw(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzDecode feeds the decoder real-shaped batches of both encodings and their mutations: it
// must never panic, never keep more than a bounded multiple of the payload, and a batch it
// accepts must decode the same a second time into a reused Batch.
func FuzzDecode(f *testing.F) {
	for _, enc := range []encoding{arrays, maps} {
		f.Add(encodeBatch(f, enc, 1.5, -1, sampleEvents()))
		f.Add(encodeBatch(f, enc, 2, 1, sampleEvents()[2:]))
		a := make([]byte, 32)
		f.Add(encodeBatch(f, enc, 3, 0, []testEvent{{Event: Event{Kind: Stored, TokenIDs: []uint32{1}, BlockSize: 1}, hashBytes: [][]byte{a}, parentB: a}}))
	}
	f.Add(deepNesting(20))
	f.Add([]byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff})
	d := NewDecoder()
	var b, again Batch
	f.Fuzz(func(t *testing.T, payload []byte) {
		if err := d.Decode(payload, &b); err != nil {
			return
		}
		var items int
		for _, e := range b.Events {
			items += len(e.BlockHashes) + len(e.TokenIDs)
		}
		if items+len(b.Events) > len(payload) {
			t.Fatalf("%d items and %d events from %d bytes", items, len(b.Events), len(payload))
		}
		if err := NewDecoder().Decode(payload, &again); err != nil {
			t.Fatalf("decoded once, then: %v", err)
		}
		if len(again.Events) != len(b.Events) || again.TS != b.TS && again.TS == again.TS {
			t.Fatalf("second decode differs: %d events vs %d", len(again.Events), len(b.Events))
		}
	})
}
