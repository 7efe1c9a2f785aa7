package mesh

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
)

// A router whose certificate another CA signed is refused by the TLS handshake; the refusing
// router logs it at warn, once per remote IP per interval, and counts every refusal.
func TestRefusedTLSHandshakeIsLoggedOnTheRefusingSide(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caFile := writeCA(t, dir, "cluster")
	rogueCA, rogueKey, rogueCAFile := writeCA(t, dir, "rogue")
	a := writeLeaf(t, dir, "a", ca, caKey, caFile)
	serverTLS, err := LoadMutualTLS(a[0], a[1], a[2])
	if err != nil {
		t.Fatal(err)
	}
	rogue := writeLeaf(t, dir, "c", rogueCA, rogueKey, rogueCAFile)
	rogueCert, err := tls.LoadX509KeyPair(rogue[0], rogue[1])
	if err != nil {
		t.Fatal(err)
	}
	// The outsider trusts the cluster's CA: all it lacks is a certificate the CA signed.
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	clientTLS := MutualTLSConfig(rogueCert, pool)
	clientTLS.NextProtos = []string{"h2"}

	clk := clock.NewFake()
	set := metrics.NewSet()
	log, logs := testutil.Logger(slog.LevelWarn)
	deps := DefaultDeps()
	deps.Metrics, deps.Clock, deps.Logger = set, clk, log
	tr, err := NewGRPCTransport(DefaultConfig(), serverTLS, deps)
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t, "127.0.0.1", 0)
	go func() { _ = tr.Serve(l) }()
	t.Cleanup(tr.Close)
	refused := set.GetOrCreateCounter(`smg_mesh_rejected_connections_total{reason="tls"}`)

	knock := func(from string, want uint64) {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if from == "127.0.0.9" {
			_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) // not TLS at all
		} else {
			tc := tls.Client(c, clientTLS)
			_ = tc.Handshake()
			_, _ = tc.Read(make([]byte, 1)) // the server's alert
		}
		testutil.Eventually(t, "the refusal counted", func() bool { return refused.Get() == want })
	}
	const line = "refused a mesh connection: TLS handshake failed"

	for i := range 3 {
		knock("127.0.0.3", uint64(i+1))
	}
	got := testutil.Lines(logs, line)
	if len(got) != 1 || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[0], "remote=127.0.0.3:") ||
		!strings.Contains(got[0], "not signed by the cluster CA") {
		t.Fatalf("want one warn line naming the remote and the reason, got %q", got)
	}
	knock("127.0.0.9", 4) // another IP is logged at once, with its own reason
	if got := testutil.Lines(logs, line); len(got) != 2 || !strings.Contains(got[1], "remote=127.0.0.9:") || !strings.Contains(got[1], "does not look like a TLS handshake") {
		t.Fatalf("want the plaintext client's refusal logged, got %q", got)
	}

	clk.Advance(DefaultRefusalLogInterval)
	knock("127.0.0.3", 5)
	if got := testutil.Lines(logs, line); len(got) != 3 || !strings.Contains(got[2], "refused_since_last_log=2") {
		t.Fatalf("want a second line for 127.0.0.3 after the interval, counting the 2 not logged, got %q", got)
	}
}
