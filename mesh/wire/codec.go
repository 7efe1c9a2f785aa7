package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Name is the codec's gRPC content-subtype.
const Name = "smg-mesh"

// Limits bound what Decode accepts.
type Limits struct {
	// MaxMessage is the largest encoded message in bytes. DefaultMaxMessage, 8 MiB: a repair
	// page is about 2 MiB, and a round's batch of deltas for a busy model must fit too.
	MaxMessage int
}

// DefaultMaxMessage is Limits.MaxMessage's default.
const DefaultMaxMessage = 8 << 20

// MaxString bounds one string or byte field (a model id, URL or routing path).
const MaxString = 4 << 20

// Errors of Decode.
var (
	ErrTooLarge  = errors.New("mesh message too large")
	ErrMalformed = errors.New("malformed mesh message")
)

// Codec encodes and decodes the mesh messages (*Ping, *Ack, *PingReq, *Sync). It implements
// grpc's encoding.CodecV2.
type Codec struct {
	limits   Limits
	rejected atomic.Uint64
}

// NewCodec returns a codec that accepts what l allows. A zero MaxMessage is not the default
// (DefaultMaxMessage, which the mesh's options start from): it accepts no message.
func NewCodec(l Limits) *Codec {
	return &Codec{limits: l}
}

// Name implements encoding.CodecV2.
func (*Codec) Name() string { return Name }

// Rejected is the number of messages Unmarshal refused.
func (c *Codec) Rejected() uint64 { return c.rejected.Load() }

// Marshal implements encoding.CodecV2.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := Encode(nil, v)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal implements encoding.CodecV2: it decodes into v, which must be a pointer to the
// message type the data holds.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if data.Len() > c.limits.MaxMessage {
		c.rejected.Add(1)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, data.Len(), c.limits.MaxMessage)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := Decode(buf.ReadOnlyData(), v); err != nil {
		c.rejected.Add(1)
		return err
	}
	return nil
}

// Field numbers, per message. They are the wire format: never renumber or reuse one; a new
// field takes a new number, and a field no longer sent keeps its number reserved.
const (
	fMemberName, fMemberAddr, fMemberStatus, fMemberIncarnation protowire.Number = 1, 2, 3, 4

	fPingFrom, fPingTarget, fPingMembers protowire.Number = 1, 2, 3

	fAckFrom, fAckOK, fAckMembers protowire.Number = 1, 2, 3

	fPingReqFrom, fPingReqTarget, fPingReqMembers protowire.Number = 1, 2, 3

	fEntryKey, fEntryValue, fEntryLamport, fEntryReplica, fEntryDeleted protowire.Number = 1, 2, 3, 4, 5

	fVersionKey, fVersionLamport, fVersionReplica protowire.Number = 1, 2, 3

	fDeltaModel, fDeltaKind, fDeltaHash, fDeltaWorker, fDeltaPath protowire.Number = 1, 2, 3, 4, 5

	fRequestID, fRequestModel, fRequestKind, fRequestCursor protowire.Number = 1, 2, 3, 4

	fPageEntryPath, fPageEntryWorkers protowire.Number = 1, 2

	fPageID, fPageModel, fPageKind, fPageCursor, fPageNext, fPageEntries protowire.Number = 1, 2, 3, 4, 5, 6

	fSyncFrom, fSyncEntries, fSyncAcks, fSyncDeltas, fSyncRequests, fSyncPages protowire.Number = 1, 2, 3, 4, 5, 6
)

// Encode appends the encoding of msg (*Ping, *Ack, *PingReq or *Sync) to dst.
func Encode(dst []byte, msg any) ([]byte, error) {
	e := encoder{b: dst}
	switch m := msg.(type) {
	case *Ping:
		e.str(fPingFrom, m.From)
		e.str(fPingTarget, m.Target)
		e.members(fPingMembers, m.Members)
	case *Ack:
		e.str(fAckFrom, m.From)
		e.bool(fAckOK, m.OK)
		e.members(fAckMembers, m.Members)
	case *PingReq:
		e.str(fPingReqFrom, m.From)
		e.member(fPingReqTarget, m.Target)
		e.members(fPingReqMembers, m.Members)
	case *Sync:
		e.sync(m)
	default:
		return dst, fmt.Errorf("cannot encode %T: not a mesh message", msg)
	}
	return e.b, nil
}

// Decode decodes b into v, a pointer to the message type b holds (*Ping, *Ack, *PingReq or
// *Sync). Fields it does not know (a newer router's) are skipped.
func Decode(b []byte, v any) error {
	d := decoder{}
	switch m := v.(type) {
	case *Ping:
		*m = d.ping(b)
	case *Ack:
		*m = d.ack(b)
	case *PingReq:
		*m = d.pingReq(b)
	case *Sync:
		*m = d.sync(b)
	default:
		return fmt.Errorf("cannot decode into %T: not a mesh message", v)
	}
	return d.err
}

// AppendTokens appends token ids as a token-tree path: 4 bytes each, little-endian.
func AppendTokens(dst []byte, tokens []uint32) []byte {
	for _, t := range tokens {
		dst = binary.LittleEndian.AppendUint32(dst, t)
	}
	return dst
}

// Tokens decodes a token-tree path (see AppendTokens) into dst[:0], or returns nil when path's
// length is not a whole number of tokens.
func Tokens(dst []uint32, path []byte) []uint32 {
	if len(path)%4 != 0 {
		return nil
	}
	dst = dst[:0]
	for i := 0; i+4 <= len(path); i += 4 {
		dst = append(dst, binary.LittleEndian.Uint32(path[i:]))
	}
	return dst
}

// encoder appends protobuf fields. Zero values are not written (proto3): the decoder reads a
// missing field as its zero value.
type encoder struct{ b []byte }

func (e *encoder) uvarint(f protowire.Number, v uint64) {
	if v != 0 {
		e.b = protowire.AppendTag(e.b, f, protowire.VarintType)
		e.b = protowire.AppendVarint(e.b, v)
	}
}

func (e *encoder) fixed64(f protowire.Number, v uint64) {
	if v != 0 {
		e.b = protowire.AppendTag(e.b, f, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, v)
	}
}

func (e *encoder) bool(f protowire.Number, v bool) {
	if v {
		e.uvarint(f, 1)
	}
}

func (e *encoder) str(f protowire.Number, s string) {
	if s != "" {
		e.b = protowire.AppendTag(e.b, f, protowire.BytesType)
		e.b = protowire.AppendString(e.b, s)
	}
}

func (e *encoder) bytes(f protowire.Number, p []byte) {
	if len(p) != 0 {
		e.b = protowire.AppendTag(e.b, f, protowire.BytesType)
		e.b = protowire.AppendBytes(e.b, p)
	}
}

// repeatedStr writes every element, empty ones too: a list keeps its length.
func (e *encoder) repeatedStr(f protowire.Number, s string) {
	e.b = protowire.AppendTag(e.b, f, protowire.BytesType)
	e.b = protowire.AppendString(e.b, s)
}

// begin starts an embedded message of field f (a list element: always written, empty or
// not); end writes its length. The length is reserved as one byte and the body moved when
// it needs more, so nothing is encoded twice.
func (e *encoder) begin(f protowire.Number) int {
	e.b = protowire.AppendTag(e.b, f, protowire.BytesType)
	e.b = append(e.b, 0)
	return len(e.b)
}

func (e *encoder) end(start int) {
	n := len(e.b) - start
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		var pad [binary.MaxVarintLen64]byte
		e.b = append(e.b, pad[:size-1]...)
		copy(e.b[start+size-1:], e.b[start:start+n])
	}
	protowire.AppendVarint(e.b[:start-1], uint64(n))
}

func (e *encoder) member(f protowire.Number, m Member) {
	at := e.begin(f)
	e.str(fMemberName, m.Name)
	e.str(fMemberAddr, m.Addr)
	e.uvarint(fMemberStatus, uint64(m.Status))
	e.uvarint(fMemberIncarnation, m.Incarnation)
	e.end(at)
}

func (e *encoder) members(f protowire.Number, ms []Member) {
	for _, m := range ms {
		e.member(f, m)
	}
}

func (e *encoder) sync(m *Sync) {
	e.str(fSyncFrom, m.From)
	for _, x := range m.Entries {
		at := e.begin(fSyncEntries)
		e.str(fEntryKey, x.Key)
		e.bytes(fEntryValue, x.Value)
		e.uvarint(fEntryLamport, x.Lamport)
		e.str(fEntryReplica, x.Replica)
		e.bool(fEntryDeleted, x.Deleted)
		e.end(at)
	}
	for _, x := range m.Acks {
		at := e.begin(fSyncAcks)
		e.str(fVersionKey, x.Key)
		e.uvarint(fVersionLamport, x.Lamport)
		e.str(fVersionReplica, x.Replica)
		e.end(at)
	}
	for _, x := range m.Deltas {
		at := e.begin(fSyncDeltas)
		e.str(fDeltaModel, x.Model)
		e.uvarint(fDeltaKind, uint64(x.Kind))
		e.fixed64(fDeltaHash, x.Hash) // a hash is uniformly large: 8 bytes beat a 10-byte varint
		e.str(fDeltaWorker, x.Worker)
		e.bytes(fDeltaPath, x.Path)
		e.end(at)
	}
	for _, x := range m.Requests {
		at := e.begin(fSyncRequests)
		e.uvarint(fRequestID, x.ID)
		e.str(fRequestModel, x.Model)
		e.uvarint(fRequestKind, uint64(x.Kind))
		e.uvarint(fRequestCursor, x.Cursor)
		e.end(at)
	}
	for _, x := range m.Pages {
		at := e.begin(fSyncPages)
		e.uvarint(fPageID, x.ID)
		e.str(fPageModel, x.Model)
		e.uvarint(fPageKind, uint64(x.Kind))
		e.uvarint(fPageCursor, x.Cursor)
		e.uvarint(fPageNext, x.Next)
		for _, pe := range x.Entries {
			pat := e.begin(fPageEntries)
			e.bytes(fPageEntryPath, pe.Path)
			for _, w := range pe.Workers {
				e.repeatedStr(fPageEntryWorkers, w)
			}
			e.end(pat)
		}
		e.end(at)
	}
}

// decoder holds the first error; every read after it returns zero values, so the message
// decoders read straight through and Decode checks once.
type decoder struct{ err error }

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

// fields iterates over the fields of one encoded message: next reads a field's tag, and
// the caller reads its value with one of the typed readers or skips it.
type fields struct {
	d   *decoder
	b   []byte
	num protowire.Number
	typ protowire.Type
}

func (d *decoder) fields(b []byte) fields { return fields{d: d, b: b} }

func (f *fields) next() bool {
	if f.d.err != nil || len(f.b) == 0 {
		return false
	}
	num, typ, n := protowire.ConsumeTag(f.b)
	if n < 0 {
		f.d.fail("bad field tag: %v", protowire.ParseError(n))
		return false
	}
	f.num, f.typ, f.b = num, typ, f.b[n:]
	return true
}

// skip passes over a field this version does not know: a newer router's.
func (f *fields) skip() {
	n := protowire.ConsumeFieldValue(f.num, f.typ, f.b)
	if n < 0 {
		f.d.fail("bad field %d: %v", f.num, protowire.ParseError(n))
		f.b = nil
		return
	}
	f.b = f.b[n:]
}

func (f *fields) want(typ protowire.Type) bool {
	if f.typ != typ {
		f.d.fail("field %d has wire type %d, want %d", f.num, f.typ, typ)
		f.b = nil
		return false
	}
	return true
}

func (f *fields) uvarint() uint64 {
	if !f.want(protowire.VarintType) {
		return 0
	}
	v, n := protowire.ConsumeVarint(f.b)
	if n < 0 {
		f.d.fail("bad varint in field %d", f.num)
		f.b = nil
		return 0
	}
	f.b = f.b[n:]
	return v
}

func (f *fields) fixed64() uint64 {
	if !f.want(protowire.Fixed64Type) {
		return 0
	}
	v, n := protowire.ConsumeFixed64(f.b)
	if n < 0 {
		f.d.fail("truncated field %d", f.num)
		f.b = nil
		return 0
	}
	f.b = f.b[n:]
	return v
}

func (f *fields) bool() bool {
	switch f.uvarint() {
	case 0:
		return false
	case 1:
		return true
	}
	f.d.fail("bad bool in field %d", f.num)
	return false
}

// raw returns a length-delimited value, aliasing the input.
func (f *fields) raw() []byte {
	if !f.want(protowire.BytesType) {
		return nil
	}
	p, n := protowire.ConsumeBytes(f.b)
	if n < 0 {
		f.d.fail("length of field %d beyond message", f.num)
		f.b = nil
		return nil
	}
	if len(p) > MaxString {
		f.d.fail("field %d is %d bytes, limit %d", f.num, len(p), MaxString)
		f.b = nil
		return nil
	}
	f.b = f.b[n:]
	return p
}

func (f *fields) str() string { return string(f.raw()) }

// bytes copies: a message must not alias gRPC's receive buffer.
func (f *fields) bytes() []byte {
	p := f.raw()
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// status and kind reject values this version does not know: they are closed sets whose
// meaning (precedence, tree) a router cannot guess; a new one needs a new field.
func (f *fields) status() Status {
	s := Status(f.uvarint())
	if s >= numStatuses {
		f.d.fail("unknown status %d", s)
	}
	return s
}

func (f *fields) kind() TreeKind {
	k := TreeKind(f.uvarint())
	if k > TreeTokens {
		f.d.fail("unknown tree kind %d", k)
	}
	return k
}

func (d *decoder) member(b []byte) (m Member) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fMemberName:
			m.Name = f.str()
		case fMemberAddr:
			m.Addr = f.str()
		case fMemberStatus:
			m.Status = f.status()
		case fMemberIncarnation:
			m.Incarnation = f.uvarint()
		default:
			f.skip()
		}
	}
	return m
}

func (d *decoder) ping(b []byte) (m Ping) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fPingFrom:
			m.From = f.str()
		case fPingTarget:
			m.Target = f.str()
		case fPingMembers:
			m.Members = append(m.Members, d.member(f.raw()))
		default:
			f.skip()
		}
	}
	return m
}

func (d *decoder) ack(b []byte) (m Ack) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fAckFrom:
			m.From = f.str()
		case fAckOK:
			m.OK = f.bool()
		case fAckMembers:
			m.Members = append(m.Members, d.member(f.raw()))
		default:
			f.skip()
		}
	}
	return m
}

func (d *decoder) pingReq(b []byte) (m PingReq) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fPingReqFrom:
			m.From = f.str()
		case fPingReqTarget:
			m.Target = d.member(f.raw())
		case fPingReqMembers:
			m.Members = append(m.Members, d.member(f.raw()))
		default:
			f.skip()
		}
	}
	return m
}

func (d *decoder) entry(b []byte) (x Entry) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fEntryKey:
			x.Key = f.str()
		case fEntryValue:
			x.Value = f.bytes()
		case fEntryLamport:
			x.Lamport = f.uvarint()
		case fEntryReplica:
			x.Replica = f.str()
		case fEntryDeleted:
			x.Deleted = f.bool()
		default:
			f.skip()
		}
	}
	return x
}

func (d *decoder) version(b []byte) (x Version) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fVersionKey:
			x.Key = f.str()
		case fVersionLamport:
			x.Lamport = f.uvarint()
		case fVersionReplica:
			x.Replica = f.str()
		default:
			f.skip()
		}
	}
	return x
}

func (d *decoder) delta(b []byte) (x TreeDelta) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fDeltaModel:
			x.Model = f.str()
		case fDeltaKind:
			x.Kind = f.kind()
		case fDeltaHash:
			x.Hash = f.fixed64()
		case fDeltaWorker:
			x.Worker = f.str()
		case fDeltaPath:
			x.Path = f.bytes()
		default:
			f.skip()
		}
	}
	return x
}

func (d *decoder) request(b []byte) (x RepairRequest) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fRequestID:
			x.ID = f.uvarint()
		case fRequestModel:
			x.Model = f.str()
		case fRequestKind:
			x.Kind = f.kind()
		case fRequestCursor:
			x.Cursor = f.uvarint()
		default:
			f.skip()
		}
	}
	return x
}

func (d *decoder) pageEntry(b []byte) (x PageEntry) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fPageEntryPath:
			x.Path = f.bytes()
		case fPageEntryWorkers:
			x.Workers = append(x.Workers, f.str())
		default:
			f.skip()
		}
	}
	return x
}

func (d *decoder) page(b []byte) (x RepairPage) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fPageID:
			x.ID = f.uvarint()
		case fPageModel:
			x.Model = f.str()
		case fPageKind:
			x.Kind = f.kind()
		case fPageCursor:
			x.Cursor = f.uvarint()
		case fPageNext:
			x.Next = f.uvarint()
		case fPageEntries:
			x.Entries = append(x.Entries, d.pageEntry(f.raw()))
		default:
			f.skip()
		}
	}
	return x
}

func (d *decoder) sync(b []byte) (m Sync) {
	for f := d.fields(b); f.next(); {
		switch f.num {
		case fSyncFrom:
			m.From = f.str()
		case fSyncEntries:
			m.Entries = append(m.Entries, d.entry(f.raw()))
		case fSyncAcks:
			m.Acks = append(m.Acks, d.version(f.raw()))
		case fSyncDeltas:
			m.Deltas = append(m.Deltas, d.delta(f.raw()))
		case fSyncRequests:
			m.Requests = append(m.Requests, d.request(f.raw()))
		case fSyncPages:
			m.Pages = append(m.Pages, d.page(f.raw()))
		default:
			f.skip()
		}
	}
	return m
}
