package policy_test

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/policy"
)

func TestStripLineage(t *testing.T) {
	cases := map[string]string{
		"conv_t2_r1":  "conv",
		"conv_t2":     "conv",
		"conv_r3":     "conv",
		"conv_r3_t2":  "conv_r3", // the turn comes before the retry; only a trailing retry is stripped first
		"conv":        "conv",
		"conv_t":      "conv_t",
		"conv_x2":     "conv_x2",
		"_t2":         "_t2", // nothing left: keys as itself
		"a_t12_r345":  "a",
		"t2":          "t2",
		"conv__t2":    "conv_",
		"conv_t2_r1x": "conv_t2_r1x",
	}
	for in, want := range cases {
		if got := string(policy.StripLineage([]byte(in))); got != want {
			t.Errorf("StripLineage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStickyKey(t *testing.T) {
	long := strings.Repeat("k", policy.MaxRoutingKeyBytes+1)
	cases := []struct {
		rid, header string
		override    bool
		key, source string
	}{
		{"conv_t2", "hdr_t1", true, "conv", policy.KeySourceRid},
		{"conv_t2", "hdr_t1", false, "hdr_t1", policy.KeySourceHeader},
		{"", "hdr_t1", true, "hdr", policy.KeySourceHeader},
		{long, "hdr", true, "hdr", policy.KeySourceHeader},
		{"\xff\xfe", "", true, "", ""},
		{"", "", true, "", ""},
	}
	for _, c := range cases {
		req := &policy.Request{Rid: []byte(c.rid), RoutingKey: []byte(c.header)}
		key, src := policy.StickyKey(req, c.override)
		if string(key) != c.key || src != c.source {
			t.Errorf("StickyKey(rid %q, header %q, override %v) = %q, %q; want %q, %q",
				c.rid, c.header, c.override, key, src, c.key, c.source)
		}
	}
}

func TestParseTargetWorker(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "1": 1, "42": 42, "007": 7} {
		if got, ok := policy.ParseTargetWorker([]byte(in)); !ok || got != want {
			t.Errorf("ParseTargetWorker(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-1", "+1", " 1", "1 ", "1.0", "x", "9999999999", "0x1"} {
		if _, ok := policy.ParseTargetWorker([]byte(in)); ok {
			t.Errorf("ParseTargetWorker(%q) accepted", in)
		}
	}
}

func FuzzParseTargetWorker(f *testing.F) {
	for _, s := range []string{"0", "1", "12", "-1", "", "x", "999999999", "1e3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		n, ok := policy.ParseTargetWorker(v)
		if !ok {
			return
		}
		if n < 0 {
			t.Fatalf("negative index %d from %q", n, v)
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				t.Fatalf("accepted non-digit in %q", v)
			}
		}
	})
}

func FuzzStripLineage(f *testing.F) {
	for _, s := range []string{"conv_t2_r1", "_t2", "a", "", "x_r", "x_t1_t2"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got := policy.StripLineage(v)
		if len(v) > 0 && len(got) == 0 {
			t.Fatalf("StripLineage(%q) is empty", v)
		}
		if !strings.HasPrefix(string(v), string(got)) {
			t.Fatalf("StripLineage(%q) = %q is not a prefix", v, got)
		}
	})
}
