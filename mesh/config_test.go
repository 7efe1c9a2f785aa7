package mesh

import (
	"strings"
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

// TestZeroSettingsAreRefused: a zero timing or size in Config, for a Node or a transport,
// is an error naming the setting, not a silent default; the defaults pass.
func TestZeroSettingsAreRefused(t *testing.T) {
	deps := testDeps()
	deps.Transport = &memTransport{}
	if _, err := NewNode(nodeConfig(t, "a", "10.0.0.1:39527"), deps); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	o := nodeConfig(t, "a", "10.0.0.1:39527")
	o.SuspectTimeout = 0
	if _, err := NewNode(o, deps); err == nil || !strings.Contains(err.Error(), "SuspectTimeout") {
		t.Errorf("zero SuspectTimeout: %v", err)
	}
	o = nodeConfig(t, "a", "10.0.0.1:39527")
	o.DeltaQueue = 0
	if _, err := NewNode(o, deps); err == nil || !strings.Contains(err.Error(), "DeltaQueue") {
		t.Errorf("zero DeltaQueue: %v", err)
	}
	if _, err := NewNode(nodeConfig(t, "a", "10.0.0.1:39527"), Deps{}); err == nil || !strings.Contains(err.Error(), "Transport") {
		t.Errorf("a node without a transport: %v", err)
	}
	for _, missing := range []string{"Metrics", "Logger", "Clock", "Spawn"} {
		d := deps
		switch missing {
		case "Metrics":
			d.Metrics = nil
		case "Logger":
			d.Logger = nil
		case "Clock":
			d.Clock = nil
		case "Spawn":
			d.Spawn = nil
		}
		want := "mesh.Deps." + missing + " is nil"
		if _, err := NewNode(nodeConfig(t, "a", "10.0.0.1:39527"), d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a node without its %s: %v, want an error containing %q", missing, err, want)
		}
		if _, err := NewGRPCTransport(DefaultConfig(), nil, d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a transport without its %s: %v, want an error containing %q", missing, err, want)
		}
	}
	tcfg := DefaultConfig()
	tcfg.BackoffBase = 0
	if _, err := NewGRPCTransport(tcfg, nil, Deps{}); err == nil || !strings.Contains(err.Error(), "BackoffBase") {
		t.Errorf("zero BackoffBase: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Enable, cfg.Host, cfg.AdvertiseHost = true, "127.0.0.1", "127.0.0.1"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	cfg.TombstoneHorizon = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "TombstoneHorizon") {
		t.Errorf("zero TombstoneHorizon: %v", err)
	}
	cfg = DefaultConfig() // disabled: the flags are not checked, the protocol's settings are
	cfg.Host, cfg.Round = "not an IP", 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Round") || strings.Contains(err.Error(), "mesh-host") {
		t.Errorf("a disabled mesh with a bad host and a zero Round: %v, want only Round refused", err)
	}
	cfg = DefaultConfig()
	cfg.BackoffMax = cfg.BackoffBase / 2
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "BackoffMax") {
		t.Errorf("BackoffMax under BackoffBase: %v", err)
	}
	cfg = DefaultConfig()
	cfg.ProbeTimeout = cfg.Round
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ProbeTimeout") {
		t.Errorf("ProbeTimeout not under Round: %v", err)
	}
}

// TestDefaultDepsSeedsEachRouterApart: DefaultDeps gives each router its own random seed,
// where a zero RandSeed is a seed like any other.
func TestDefaultDepsSeedsEachRouterApart(t *testing.T) {
	a, b := DefaultDeps().RandSeed, DefaultDeps().RandSeed
	if a == b {
		t.Fatalf("two routers' DefaultDeps share the seed %d", a)
	}
}
