package wire

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

func sampleMessages() []any {
	members := []Member{
		{Name: "a", Addr: "127.0.0.1:39527", Status: StatusAlive, Incarnation: 3},
		{Name: "b", Addr: "127.0.0.2:39527", Status: StatusDown, Incarnation: 1 << 40},
	}
	longPath := make([]byte, 300) // an embedded message whose length takes two bytes
	for i := range longPath {
		longPath[i] = byte(i)
	}
	return []any{
		&Ping{From: "a", Target: "b", Members: members},
		&Ack{From: "b", OK: true, Members: members[:1]},
		&Ack{From: "b"},
		&PingReq{From: "a", Target: members[1], Members: members},
		&PingReq{From: "a", Members: []Member{{}}},
		&Sync{From: "a"},
		&Sync{
			From:     "a",
			Entries:  []Entry{{Key: "worker:a:http://w:1", Value: []byte(`{"url":"http://w:1"}`), Lamport: 7, Replica: "a"}, {Key: "k", Lamport: 9, Replica: "b", Deleted: true}},
			Acks:     []Version{{Key: "k", Lamport: 9, Replica: "b"}},
			Deltas:   []TreeDelta{{Model: "m", Kind: TreeTokens, Hash: 42, Worker: "http://w:1", Path: AppendTokens(nil, []uint32{1, 0x01020304})}},
			Requests: []RepairRequest{{ID: 5, Model: "m", Kind: TreeText, Cursor: 1 << 33}},
			Pages: []RepairPage{{ID: 5, Model: "m", Cursor: 0, Next: CursorDone, Entries: []PageEntry{
				{Path: []byte("hello"), Workers: []string{"http://w:1", "http://w:2", ""}}, {Path: []byte("x")}, {}, {Path: longPath},
			}}},
		},
	}
}

// newOf returns a new zero message of msg's type.
func newOf(msg any) any { return reflect.New(reflect.TypeOf(msg).Elem()).Interface() }

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		b, err := Encode(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got := newOf(m)
		if err := Decode(b, got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %T:\n got %+v\nwant %+v", m, got, m)
		}
	}
}

// pb builds protobuf messages by hand, the way a router of another version could encode them.
type pb []byte

func (p pb) str(n protowire.Number, s string) pb {
	return protowire.AppendString(protowire.AppendTag(p, n, protowire.BytesType), s)
}

func (p pb) varint(n protowire.Number, v uint64) pb {
	return protowire.AppendVarint(protowire.AppendTag(p, n, protowire.VarintType), v)
}

func (p pb) msg(n protowire.Number, sub pb) pb {
	return protowire.AppendBytes(protowire.AppendTag(p, n, protowire.BytesType), sub)
}

// newer appends fields no router knows today, one of every wire type.
func (p pb) newer() pb {
	p = p.varint(100, 7)
	p = protowire.AppendFixed32(protowire.AppendTag(p, 101, protowire.Fixed32Type), 7)
	p = protowire.AppendFixed64(protowire.AppendTag(p, 102, protowire.Fixed64Type), 7)
	p = p.msg(103, pb{}.str(1, "a field of a message type added later"))
	p = protowire.AppendGroup(protowire.AppendTag(p, 104, protowire.StartGroupType), 104, pb{}.varint(1, 1))
	return p
}

// TestNewerRouterFieldsAreSkipped is the rolling upgrade: a router one version ahead sends
// fields this one does not know, at the top level and inside embedded messages, before,
// between and after the known ones. Today's decoder reads what it knows and skips the rest.
func TestNewerRouterFieldsAreSkipped(t *testing.T) {
	member := pb{}.newer().str(fMemberName, "c").str(fMemberAddr, "127.0.0.3:39527").newer().
		varint(fMemberStatus, uint64(StatusSuspected)).varint(fMemberIncarnation, 4).newer()
	ping := pb{}.newer().str(fPingFrom, "a").str(fPingTarget, "c").msg(fPingMembers, member).newer()
	var gotPing Ping
	if err := Decode(ping, &gotPing); err != nil {
		t.Fatalf("a newer router's ping: %v", err)
	}
	wantPing := Ping{From: "a", Target: "c", Members: []Member{{Name: "c", Addr: "127.0.0.3:39527", Status: StatusSuspected, Incarnation: 4}}}
	if !reflect.DeepEqual(gotPing, wantPing) {
		t.Fatalf("newer ping decoded as %+v, want %+v", gotPing, wantPing)
	}

	delta := pb{}.str(fDeltaModel, "m").varint(fDeltaKind, uint64(TreeText)).newer().str(fDeltaWorker, "http://w:1").str(fDeltaPath, "hi")
	entry := pb{}.str(fPageEntryPath, "x").newer().str(fPageEntryWorkers, "http://w:2")
	page := pb{}.varint(fPageID, 9).msg(fPageEntries, entry).newer().varint(fPageNext, 3)
	sync := pb{}.str(fSyncFrom, "a").msg(fSyncDeltas, delta).newer().msg(fSyncPages, page).msg(110, pb{}.str(1, "a new list"))
	var gotSync Sync
	if err := Decode(sync, &gotSync); err != nil {
		t.Fatalf("a newer router's sync: %v", err)
	}
	wantSync := Sync{From: "a",
		Deltas: []TreeDelta{{Model: "m", Kind: TreeText, Worker: "http://w:1", Path: []byte("hi")}},
		Pages:  []RepairPage{{ID: 9, Next: 3, Entries: []PageEntry{{Path: []byte("x"), Workers: []string{"http://w:2"}}}}},
	}
	if !reflect.DeepEqual(gotSync, wantSync) {
		t.Fatalf("newer sync decoded as %+v, want %+v", gotSync, wantSync)
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(nil, sampleMessages()[6])
	cases := map[string]struct {
		b []byte
		v any
	}{
		"truncated":         {good[:len(good)-1], &Sync{}},
		"trailing garbage":  {append(append([]byte(nil), good...), 0), &Sync{}},
		"field number zero": {pb{}.varint(0, 1), &Ping{}},
		"wrong wire type":   {pb{}.varint(fPingFrom, 1), &Ping{}},
		"length beyond":     {protowire.AppendVarint(protowire.AppendTag(nil, fPingFrom, protowire.BytesType), 1<<40), &Ping{}},
		"huge string":       {pb{}.str(fPingFrom, string(make([]byte, MaxString+1))), &Ping{}},
		"bad status":        {pb{}.msg(fPingMembers, pb{}.varint(fMemberStatus, 9)), &Ping{}},
		"bad bool":          {pb{}.varint(fAckOK, 7), &Ack{}},
		"bad varint":        {append(protowire.AppendTag(nil, fSyncRequests, protowire.VarintType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), &Sync{}},
		"bad treekind":      {pb{}.msg(fSyncDeltas, pb{}.varint(fDeltaKind, 7)), &Sync{}},
		"bad nested":        {pb{}.msg(fSyncPages, pb{}.msg(fPageEntries, pb{0xff})), &Sync{}},
		"unfinished group":  {protowire.AppendTag(nil, 104, protowire.StartGroupType), &Sync{}},
	}
	for name, c := range cases {
		if err := Decode(c.b, c.v); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	if err := Decode(good, new(int)); err == nil || errors.Is(err, ErrMalformed) {
		t.Errorf("decoding into an *int: err = %v, want a usage error", err)
	}
}

func TestCodecCountsRejections(t *testing.T) {
	c := NewCodec(Limits{MaxMessage: 64})
	big, _ := Encode(nil, &Ping{From: string(make([]byte, 100))})
	var p Ping
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(big)}, &p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: err = %v, want ErrTooLarge", err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(pb{}.str(fPingFrom, "a")[:2])}, &p); !errors.Is(err, ErrMalformed) {
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
	var m Sync
	if err := Decode(b, &m); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if got := string(m.Deltas[0].Path); got != "abc" {
		t.Fatalf("path changed with the input buffer: %q", got)
	}
}

// TestTokenPathsAreLittleEndian pins the token path's byte order: routers on hosts of
// different endianness read each other's paths.
func TestTokenPathsAreLittleEndian(t *testing.T) {
	path := AppendTokens(nil, []uint32{0x01020304, 7})
	if want := []byte{4, 3, 2, 1, 7, 0, 0, 0}; !reflect.DeepEqual(path, want) {
		t.Fatalf("AppendTokens = %v, want %v", path, want)
	}
	if got := Tokens(nil, path); !reflect.DeepEqual(got, []uint32{0x01020304, 7}) {
		t.Fatalf("Tokens = %v", got)
	}
	if got := Tokens(nil, path[:5]); got != nil {
		t.Fatalf("Tokens of a partial token = %v, want nil", got)
	}
}

// FuzzDecode decodes any input as each message type: no panic, and whatever decodes
// re-encodes to a message that decodes to the same value.
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := Encode(nil, m)
		f.Add(b)
	}
	f.Add([]byte(pb{}.newer().str(fPingFrom, "a").msg(fPingMembers, pb{}.str(fMemberName, "c").newer())))
	f.Add([]byte(pb{}.msg(fSyncPages, pb{}.msg(fPageEntries, pb{}.str(fPageEntryWorkers, "w").newer()))))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, zero := range []any{&Ping{}, &Ack{}, &PingReq{}, &Sync{}} {
			m := newOf(zero)
			if err := Decode(b, m); err != nil {
				continue
			}
			again, err := Encode(nil, m)
			if err != nil {
				t.Fatal(err)
			}
			m2 := newOf(zero)
			if err := Decode(again, m2); err != nil {
				t.Fatalf("re-encoded %T does not decode: %v", m, err)
			}
			if !reflect.DeepEqual(m, m2) {
				t.Fatalf("decode(encode(m)) != m:\n%+v\n%+v", m, m2)
			}
		}
	})
}
