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

// FuzzLimitConnFollow feeds the ZMTP frame follower arbitrary streams in arbitrary chunks: it
// never panics, and it never lets a message past the limit.
func FuzzLimitConnFollow(f *testing.F) {
	greeting := make([]byte, zmtpGreeting)
	f.Add(append(append([]byte{}, greeting...), flagCommand, 5, 'R', 'E', 'A', 'D', 'Y', 0, 3, 'a', 'b', 'c'), uint8(7))
	f.Add(append(append([]byte{}, greeting...), flagLong, 0, 0, 0, 1, 0, 0, 0, 0), uint8(1))
	f.Add(append(append([]byte{}, greeting...), flagMore, 200, flagMore, 200), uint8(3))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		const limit = 300
		c := &limitConn{limit: limit, greeting: zmtpGreeting}
		step := int(chunk%16) + 1
		for i := 0; i < len(stream); i += step {
			if err := c.follow(stream[i:min(i+step, len(stream))]); err != nil {
				return
			}
			if c.msg > limit {
				t.Fatalf("a message of %d bytes passed a limit of %d", c.msg, limit)
			}
		}
	})
}
