package traceparent

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// HeaderLen is the length of a version-00 traceparent value.
const HeaderLen = 55

// FlagSampled is the sampled bit of the trace flags.
const FlagSampled = 0x01

// Context is a span's trace context as traceparent carries it.
type Context struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// Sampled reports the sampled flag.
func (c *Context) Sampled() bool { return c.Flags&FlagSampled != 0 }

// Parse reads a traceparent header value (surrounding spaces and tabs allowed). ok is false
// when it is not one a receiver may use; c is then zero.
func Parse(v []byte) (c Context, ok bool) {
	v = trimOWS(v)
	if len(v) < HeaderLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return Context{}, false
	}
	version, ok := hexByte(v[0], v[1])
	switch {
	case !ok || version == 0xff:
		return Context{}, false
	case version == 0 && len(v) != HeaderLen:
		return Context{}, false
	case version > 0 && len(v) > HeaderLen && v[HeaderLen] != '-':
		return Context{}, false
	}
	if !decodeHex(c.TraceID[:], v[3:35]) || !decodeHex(c.SpanID[:], v[36:52]) {
		return Context{}, false
	}
	if c.Flags, ok = hexByte(v[53], v[54]); !ok || isZero(c.TraceID[:]) || isZero(c.SpanID[:]) {
		return Context{}, false
	}
	return c, true
}

// Append appends c as a version-00 traceparent value (HeaderLen bytes).
func Append(dst []byte, c *Context) []byte {
	dst = append(dst, "00-"...)
	dst = appendHex(dst, c.TraceID[:])
	dst = append(dst, '-')
	dst = appendHex(dst, c.SpanID[:])
	dst = append(dst, '-')
	return append(dst, hexDigits[c.Flags>>4], hexDigits[c.Flags&15])
}

// NewTraceID returns a random trace id, never all zeros.
func NewTraceID() (id [16]byte) {
	for isZero(id[:]) {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

// NewSpanID returns a random span id, never all zeros.
func NewSpanID() (id [8]byte) {
	for isZero(id[:]) {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// Ratio samples a fraction of the traces, decided on the trace id alone.
type Ratio struct{ bound uint64 }

// NewRatio returns the sampler of fraction r (clamped to [0, 1]): 1 keeps every trace, 0
// none.
func NewRatio(r float64) Ratio {
	switch {
	case r >= 1:
		return Ratio{bound: math.MaxUint64}
	case r <= 0 || math.IsNaN(r):
		return Ratio{}
	}
	return Ratio{bound: uint64(r * (1 << 63))}
}

// Sampled reports whether the trace is kept: its id's low 63 bits (as a big-endian number,
// the upper of the last 8 bytes) fall below the ratio's bound, OpenTelemetry's rule.
func (s Ratio) Sampled(traceID *[16]byte) bool {
	if s.bound == math.MaxUint64 {
		return true
	}
	return binary.BigEndian.Uint64(traceID[8:16])>>1 < s.bound
}

func trimOWS(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// unhex maps a lowercase hex digit to its value, every other byte to invalid.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = invalid
	}
	for i, c := range hexDigits {
		t[c] = byte(i)
	}
	return t
}()

const invalid = 0xff

func hexByte(hi, lo byte) (byte, bool) {
	h, l := unhex[hi], unhex[lo]
	return h<<4 | l, (h|l)&0xf0 == 0
}

func decodeHex(dst, src []byte) bool {
	_ = src[2*len(dst)-1]
	bad := byte(0)
	for i := range dst {
		h, l := unhex[src[2*i]], unhex[src[2*i+1]]
		bad |= (h | l) & 0xf0
		dst[i] = h<<4 | l
	}
	return bad == 0
}

const hexDigits = "0123456789abcdef"

func appendHex(dst, src []byte) []byte {
	for _, b := range src {
		dst = append(dst, hexDigits[b>>4], hexDigits[b&15])
	}
	return dst
}
