package traceparent

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"
)

const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		ok      bool
		flags   byte
	}{
		{"version 00 sampled", valid, true, 1},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, 0},
		{"other flags kept", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", true, 3},
		{"spaces around", " \t" + valid + " ", true, 1},
		{"later version, longer", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", true, 1},
		{"later version, exact", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, 1},
		{"later version, no dash after", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false, 0},
		{"version 00 longer", valid + "-00", false, 0},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, 0},
		{"uppercase hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, 0},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, 0},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, 0},
		{"short", valid[:54], false, 0},
		{"empty", "", false, 0},
		{"bad separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, 0},
		{"non-hex flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false, 0},
		{"non-hex version", "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := Parse([]byte(tc.v))
			if ok != tc.ok {
				t.Fatalf("Parse(%q) ok = %v, want %v", tc.v, ok, tc.ok)
			}
			if !ok {
				if c != (Context{}) {
					t.Fatalf("Parse(%q) = %+v on failure, want zero", tc.v, c)
				}
				return
			}
			if got := hex.EncodeToString(c.TraceID[:]); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("trace id %s", got)
			}
			if got := hex.EncodeToString(c.SpanID[:]); got != "00f067aa0ba902b7" {
				t.Errorf("span id %s", got)
			}
			if c.Flags != tc.flags || c.Sampled() != (tc.flags&1 == 1) {
				t.Errorf("flags %02x sampled %v, want %02x", c.Flags, c.Sampled(), tc.flags)
			}
		})
	}
}

func TestAppendRoundTrips(t *testing.T) {
	c, _ := Parse([]byte(valid))
	if got := string(Append(nil, &c)); got != valid {
		t.Fatalf("Append = %q, want %q", got, valid)
	}
	for range 1000 {
		c := Context{TraceID: NewTraceID(), SpanID: NewSpanID(), Flags: byte(len(valid))}
		v := Append(nil, &c)
		if len(v) != HeaderLen {
			t.Fatalf("Append wrote %d bytes, want %d", len(v), HeaderLen)
		}
		if back, ok := Parse(v); !ok || back != c {
			t.Fatalf("Parse(Append(%+v)) = %+v, %v", c, back, ok)
		}
	}
}

// TestRatioMatchesOpenTelemetry: the decision is OpenTelemetry's TraceIDRatioBased rule on
// the trace id's last 8 bytes, and the kept fraction follows the ratio.
func TestRatioMatchesOpenTelemetry(t *testing.T) {
	at := func(last8 uint64) *[16]byte {
		var id [16]byte
		for i := range 8 {
			id[15-i] = byte(last8 >> (8 * i))
		}
		return &id
	}
	half := NewRatio(0.5)
	if !half.Sampled(at(1<<63 - 1)) { // >>1 is 2^62-1, below 2^62
		t.Error("0.5 drops an id just below the bound")
	}
	if half.Sampled(at(1 << 63)) { // >>1 is 2^62, the bound
		t.Error("0.5 keeps the id at the bound")
	}
	if NewRatio(0).Sampled(at(0)) || NewRatio(-1).Sampled(at(0)) || NewRatio(math.NaN()).Sampled(at(0)) {
		t.Error("ratio 0 keeps a trace")
	}
	if !NewRatio(1).Sampled(at(math.MaxUint64)) || !NewRatio(2).Sampled(at(math.MaxUint64)) {
		t.Error("ratio 1 drops a trace")
	}
	kept := 0
	const n = 20000
	r := NewRatio(0.25)
	for range n {
		id := NewTraceID()
		if r.Sampled(&id) {
			kept++
		}
	}
	if kept < n/4-n/40 || kept > n/4+n/40 { // 10% of the expected count; ~14 standard deviations
		t.Fatalf("ratio 0.25 kept %d of %d", kept, n)
	}
}

func TestNewIDsAreNotZero(t *testing.T) {
	seen := map[[8]byte]bool{}
	for range 1000 {
		s := NewSpanID()
		if s == ([8]byte{}) || seen[s] {
			t.Fatalf("span id %x zero or repeated", s)
		}
		seen[s] = true
		if NewTraceID() == ([16]byte{}) {
			t.Fatal("zero trace id")
		}
	}
}

func TestParseAndAppendDoNotAllocate(t *testing.T) {
	v := []byte(valid)
	buf := make([]byte, 0, HeaderLen)
	r := NewRatio(0.5)
	allocs := testing.AllocsPerRun(1000, func() {
		c, ok := Parse(v)
		if !ok {
			t.Fatal("valid header refused")
		}
		c.SpanID = NewSpanID()
		c.TraceID = NewTraceID()
		_ = r.Sampled(&c.TraceID)
		buf = Append(buf[:0], &c)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per parse and append, want 0", allocs)
	}
}

// FuzzParseTraceparent: Parse never panics, accepts only what it can write back (the
// version-00 form of an accepted header is the header itself, up to the version and what a
// later version adds), and never accepts zero ids or uppercase hex.
func FuzzParseTraceparent(f *testing.F) {
	for _, s := range []string{valid, "", valid[:54], "ff" + valid[2:], "cc" + valid[2:] + "-x", valid + "-",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", " " + valid + "\t", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		c, ok := Parse(v)
		if !ok {
			if c != (Context{}) {
				t.Fatalf("refused %q but returned %+v", v, c)
			}
			return
		}
		if c.TraceID == ([16]byte{}) || c.SpanID == ([8]byte{}) {
			t.Fatalf("accepted zero ids in %q", v)
		}
		w := Append(nil, &c)
		trimmed := trimOWS(v)
		if !bytes.Equal(w[2:], trimmed[2:HeaderLen]) {
			t.Fatalf("Append(Parse(%q)) = %q", v, w)
		}
		if back, ok := Parse(w); !ok || back != c {
			t.Fatalf("Parse(Append(Parse(%q))) = %+v, %v", v, back, ok)
		}
	})
}
