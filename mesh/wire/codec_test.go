package wire

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/grpc/mem"
)

func sampleMessages() []any {
	members := []Member{
		{Name: "a", Addr: "127.0.0.1:39527", Status: StatusAlive, Incarnation: 3},
		{Name: "b", Addr: "127.0.0.2:39527", Status: StatusDown, Incarnation: 1 << 40},
	}
	return []any{
		&Ping{From: "a", Target: "b", Members: members},
		&Ack{From: "b", OK: true, Members: members[:1]},
		&Ack{From: "b"},
		&PingReq{From: "a", Target: members[1], Members: members},
		&Sync{From: "a"},
		&Sync{
			From:     "a",
			Entries:  []Entry{{Key: "worker:a:http://w:1", Value: []byte(`{"url":"http://w:1"}`), Lamport: 7, Replica: "a"}, {Key: "k", Lamport: 9, Replica: "b", Deleted: true}},
			Acks:     []Version{{Key: "k", Lamport: 9, Replica: "b"}},
			Deltas:   []TreeDelta{{Model: "m", Kind: TreeTokens, Hash: 42, Worker: "http://w:1", Path: []byte{1, 0, 0, 0}}},
			Requests: []RepairRequest{{ID: 5, Model: "m", Kind: TreeText, Cursor: 1 << 33}},
			Pages: []RepairPage{{ID: 5, Model: "m", Cursor: 0, Next: CursorDone, Entries: []PageEntry{
				{Path: []byte("hello"), Workers: []string{"http://w:1", "http://w:2"}}, {Path: []byte("x")},
			}}},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b, err := Encode(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %T:\n got %+v\nwant %+v", m, got, m)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(nil, sampleMessages()[5])
	cases := map[string][]byte{
		"empty":        nil,
		"unknown tag":  {99},
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"huge count":   {tagPing, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge string":  {tagPing, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad status":   {tagPing, 0, 0, 1, 0, 0, 9, 0},
		"bad bool":     {tagAck, 0, 7, 0},
		"bad varint":   {tagSync, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"bad treekind": {tagSync, 0, 0, 0, 1, 0, 7, 0, 0, 0, 0, 0},
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	var p Ping
	if err := DecodeInto(good, &p); !errors.Is(err, ErrMalformed) {
		t.Errorf("decoding a Sync into a Ping: err = %v, want ErrMalformed", err)
	}
}

func TestCodecCountsRejections(t *testing.T) {
	c := NewCodec(Limits{MaxMessage: 64})
	big, _ := Encode(nil, &Ping{From: string(make([]byte, 100))})
	var p Ping
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(big)}, &p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: err = %v, want ErrTooLarge", err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{tagPing, 5})}, &p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed: err = %v, want ErrMalformed", err)
	}
	small, err := c.Marshal(&Ping{From: "a", Target: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(small, &p); err != nil || p.From != "a" || p.Target != "b" {
		t.Fatalf("valid message: %+v, %v", p, err)
	}
	if got := c.Rejected(); got != 2 {
		t.Fatalf("Rejected() = %d, want 2", got)
	}
}

func TestDecodedBytesDoNotAliasInput(t *testing.T) {
	b, _ := Encode(nil, &Sync{Deltas: []TreeDelta{{Model: "m", Path: []byte("abc")}}})
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if got := string(m.(*Sync).Deltas[0].Path); got != "abc" {
		t.Fatalf("path changed with the input buffer: %q", got)
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := Encode(nil, m)
		f.Add(b)
	}
	f.Add([]byte{tagSync, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("decode(encode(m)) != m:\n%+v\n%+v", m, m2)
		}
	})
}
