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

func TestRefusesPeerWorkersOnlyOnAPlaintextMeshWithAKey(t *testing.T) {
	for _, c := range []struct {
		protected, tls, allow, want bool
	}{
		{protected: true, want: true},
		{protected: true, tls: true},
		{protected: true, allow: true},
		{},
		{allow: true},
	} {
		cfg := Config{WorkerAPIProtected: c.protected, AllowInsecure: c.allow}
		if c.tls {
			cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = "c", "k", "ca"
		}
		if got := cfg.RefusesPeerWorkers(); got != c.want {
			t.Errorf("%+v: RefusesPeerWorkers() = %v", c, got)
		}
	}
}
