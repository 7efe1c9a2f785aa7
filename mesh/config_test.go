package mesh

import (
	"testing"
)

// FuzzParsePeerURL: a peer URL parses only as IP:port, never panics, and its canonical form
// parses to itself.
func FuzzParsePeerURL(f *testing.F) {
	for _, s := range []string{"10.0.0.1:39527", "[::1]:1", "host:1", "10.0.0.1", "1.2.3.4:0", " 1.2.3.4:5 ", "[fe80::1%eth0]:9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParsePeerURL(s)
		if err != nil {
			return
		}
		again, err := ParsePeerURL(a)
		if err != nil || again != a {
			t.Fatalf("canonical %q of %q reparses to %q, %v", a, s, again, err)
		}
	})
}
