package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/mem"
)

// Name is the codec's gRPC content-subtype.
const Name = "smg-mesh"

// Limits bound what Decode accepts.
type Limits struct {
	// MaxMessage is the largest encoded message in bytes. Default 8 MiB: a repair page is
	// about 2 MiB, and a round's batch of deltas for a busy model must fit too.
	MaxMessage int
}

// DefaultMaxMessage is Limits.MaxMessage's default.
const DefaultMaxMessage = 8 << 20

// MaxString bounds one string or byte field (a model id, URL or routing path).
const MaxString = 4 << 20

// Message tags.
const (
	tagPing    byte = 1
	tagAck     byte = 2
	tagPingReq byte = 3
	tagSync    byte = 4
)

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

// NewCodec returns a codec; zero limits select the defaults.
func NewCodec(l Limits) *Codec {
	if l.MaxMessage <= 0 {
		l.MaxMessage = DefaultMaxMessage
	}
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
	if err := DecodeInto(buf.ReadOnlyData(), v); err != nil {
		c.rejected.Add(1)
		return err
	}
	return nil
}

// Encode appends the encoding of msg (*Ping, *Ack, *PingReq or *Sync) to dst.
func Encode(dst []byte, msg any) ([]byte, error) {
	e := encoder{b: dst}
	switch m := msg.(type) {
	case *Ping:
		e.b = append(e.b, tagPing)
		e.str(m.From)
		e.str(m.Target)
		e.members(m.Members)
	case *Ack:
		e.b = append(e.b, tagAck)
		e.str(m.From)
		e.bool(m.OK)
		e.members(m.Members)
	case *PingReq:
		e.b = append(e.b, tagPingReq)
		e.str(m.From)
		e.member(m.Target)
		e.members(m.Members)
	case *Sync:
		e.b = append(e.b, tagSync)
		e.sync(m)
	default:
		return dst, fmt.Errorf("cannot encode %T: not a mesh message", msg)
	}
	return e.b, nil
}

// Decode decodes one message and returns it as *Ping, *Ack, *PingReq or *Sync.
func Decode(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	var v any
	switch b[0] {
	case tagPing:
		v = new(Ping)
	case tagAck:
		v = new(Ack)
	case tagPingReq:
		v = new(PingReq)
	case tagSync:
		v = new(Sync)
	default:
		return nil, fmt.Errorf("%w: unknown tag %d", ErrMalformed, b[0])
	}
	if err := DecodeInto(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

// DecodeInto decodes b into v, a pointer to the message type b holds.
func DecodeInto(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty", ErrMalformed)
	}
	d := decoder{b: b[1:]}
	want := byte(0)
	switch m := v.(type) {
	case *Ping:
		want = tagPing
		*m = Ping{From: d.str(), Target: d.str(), Members: d.members()}
	case *Ack:
		want = tagAck
		*m = Ack{From: d.str(), OK: d.bool(), Members: d.members()}
	case *PingReq:
		want = tagPingReq
		*m = PingReq{From: d.str(), Target: d.member(), Members: d.members()}
	case *Sync:
		want = tagSync
		*m = Sync{}
		d.sync(m)
	default:
		return fmt.Errorf("cannot decode into %T: not a mesh message", v)
	}
	if b[0] != want {
		return fmt.Errorf("%w: tag %d where %d was expected", ErrMalformed, b[0], want)
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return nil
}

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) member(m Member) {
	e.str(m.Name)
	e.str(m.Addr)
	e.b = append(e.b, byte(m.Status))
	e.uvarint(m.Incarnation)
}

func (e *encoder) members(ms []Member) {
	e.uvarint(uint64(len(ms)))
	for _, m := range ms {
		e.member(m)
	}
}

func (e *encoder) sync(m *Sync) {
	e.str(m.From)
	e.uvarint(uint64(len(m.Entries)))
	for _, x := range m.Entries {
		e.str(x.Key)
		e.bytes(x.Value)
		e.uvarint(x.Lamport)
		e.str(x.Replica)
		e.bool(x.Deleted)
	}
	e.uvarint(uint64(len(m.Acks)))
	for _, x := range m.Acks {
		e.str(x.Key)
		e.uvarint(x.Lamport)
		e.str(x.Replica)
	}
	e.uvarint(uint64(len(m.Deltas)))
	for _, x := range m.Deltas {
		e.str(x.Model)
		e.b = append(e.b, byte(x.Kind))
		e.uvarint(x.Hash)
		e.str(x.Worker)
		e.bytes(x.Path)
	}
	e.uvarint(uint64(len(m.Requests)))
	for _, x := range m.Requests {
		e.uvarint(x.ID)
		e.str(x.Model)
		e.b = append(e.b, byte(x.Kind))
		e.uvarint(x.Cursor)
	}
	e.uvarint(uint64(len(m.Pages)))
	for _, x := range m.Pages {
		e.uvarint(x.ID)
		e.str(x.Model)
		e.b = append(e.b, byte(x.Kind))
		e.uvarint(x.Cursor)
		e.uvarint(x.Next)
		e.uvarint(uint64(len(x.Entries)))
		for _, pe := range x.Entries {
			e.bytes(pe.Path)
			e.uvarint(uint64(len(pe.Workers)))
			for _, w := range pe.Workers {
				e.str(w)
			}
		}
	}
}

// decoder reads fields; the first error sticks and every later read returns zero values, so
// decoding code reads straight through and checks once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > MaxString || n > uint64(len(d.b)) {
		d.fail("string length beyond message")
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) bytes() []byte {
	p := d.raw()
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// count reads a list length and checks that the rest of the message could hold that many
// elements of at least minSize bytes, so a forged count cannot make us allocate.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.fail("list count beyond message")
		return 0
	}
	return int(n)
}

func (d *decoder) status() Status {
	s := Status(d.byte())
	if s >= numStatuses {
		d.fail("unknown status")
	}
	return s
}

func (d *decoder) kind() TreeKind {
	k := TreeKind(d.byte())
	if k > TreeTokens {
		d.fail("unknown tree kind")
	}
	return k
}

func (d *decoder) member() Member {
	return Member{Name: d.str(), Addr: d.str(), Status: d.status(), Incarnation: d.uvarint()}
}

func (d *decoder) members() []Member {
	n := d.count(4)
	if n == 0 {
		return nil
	}
	ms := make([]Member, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		ms = append(ms, d.member())
	}
	return ms
}

func (d *decoder) sync(m *Sync) {
	m.From = d.str()
	if n := d.count(5); n > 0 {
		m.Entries = make([]Entry, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			m.Entries = append(m.Entries, Entry{Key: d.str(), Value: d.bytes(), Lamport: d.uvarint(), Replica: d.str(), Deleted: d.bool()})
		}
	}
	if n := d.count(3); n > 0 {
		m.Acks = make([]Version, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			m.Acks = append(m.Acks, Version{Key: d.str(), Lamport: d.uvarint(), Replica: d.str()})
		}
	}
	if n := d.count(5); n > 0 {
		m.Deltas = make([]TreeDelta, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			m.Deltas = append(m.Deltas, TreeDelta{Model: d.str(), Kind: d.kind(), Hash: d.uvarint(), Worker: d.str(), Path: d.bytes()})
		}
	}
	if n := d.count(4); n > 0 {
		m.Requests = make([]RepairRequest, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			m.Requests = append(m.Requests, RepairRequest{ID: d.uvarint(), Model: d.str(), Kind: d.kind(), Cursor: d.uvarint()})
		}
	}
	if n := d.count(6); n > 0 {
		m.Pages = make([]RepairPage, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			p := RepairPage{ID: d.uvarint(), Model: d.str(), Kind: d.kind(), Cursor: d.uvarint(), Next: d.uvarint()}
			if k := d.count(2); k > 0 {
				p.Entries = make([]PageEntry, 0, k)
				for j := 0; j < k && d.err == nil; j++ {
					pe := PageEntry{Path: d.bytes()}
					if w := d.count(1); w > 0 {
						pe.Workers = make([]string, 0, w)
						for x := 0; x < w && d.err == nil; x++ {
							pe.Workers = append(pe.Workers, d.str())
						}
					}
					p.Entries = append(p.Entries, pe)
				}
			}
			m.Pages = append(m.Pages, p)
		}
	}
}
