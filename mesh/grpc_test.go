package mesh

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
	"github.com/smg-go/smg/worker"
)

// router is an in-process router for loopback tests: a registry and a mesh on real gRPC.
type router struct {
	t    *testing.T
	name string
	ip   string
	port int
	reg  *worker.Registry
	mesh *Mesh
	set  *metrics.Set
}

// fastRounds shortens the protocol's clock for loopback tests: rounds of 250 ms (a probe's
// deadline, which a 2-core machine running every package's tests with -race must still
// meet), and the other timings scaled alike, so that a test covering suspicion and rejoin
// takes seconds.
func fastRounds(c *Config) {
	c.Round = 250 * time.Millisecond
	c.SuspectTimeout = 1250 * time.Millisecond
	c.BackoffBase = 100 * time.Millisecond
	c.BackoffMax = 200 * time.Millisecond
	c.RequestTimeout = 2 * time.Second
	c.ProbeTimeout = 125 * time.Millisecond
	c.RepairTimeout = 2 * time.Second
	c.ReconnectEvery = 4
}

func listen(t *testing.T, ip string, port int) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Skipf("cannot listen on %s (loopback aliases unavailable?): %v", ip, err)
	}
	return l
}

func startRouter(t *testing.T, name, ip string, port int, tlsFiles []string, peers ...*router) *router {
	t.Helper()
	l := listen(t, ip, port)
	r := &router{t: t, name: name, ip: ip, port: l.Addr().(*net.TCPAddr).Port, set: metrics.NewSet()}
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	r.reg = reg
	cfg := DefaultConfig()
	cfg.Enable, cfg.ServerName, cfg.Host, cfg.Port = true, name, ip, r.port
	for _, p := range peers {
		cfg.PeerURLs = append(cfg.PeerURLs, net.JoinHostPort(p.ip, strconv.Itoa(p.port)))
	}
	if tlsFiles != nil {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = tlsFiles[0], tlsFiles[1], tlsFiles[2]
	}
	fastRounds(&cfg)
	deps := DefaultDeps()
	deps.Registry, deps.Metrics, deps.Logger, deps.Listener = reg, r.set, testutil.Quiet, l
	m, err := Start(context.Background(), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	r.mesh = m
	t.Cleanup(r.stop)
	return r
}

func (r *router) stop() {
	r.mesh.Close()
	r.reg.Close()
}

func (r *router) addr() string { return net.JoinHostPort(r.ip, strconv.Itoa(r.port)) }

func (r *router) status(name string) wire.Status {
	for _, m := range r.mesh.Node().Members() {
		if m.Name == name {
			return m.Status
		}
	}
	return wire.StatusInit
}

func (r *router) hasWorker(url string) bool { return r.reg.Current().ByURL(url) != nil }

func addWorker(t *testing.T, r *router, url, apiKey string) *worker.Worker {
	t.Helper()
	spec := worker.Spec{URL: url, ModelID: "m", APIKey: apiKey}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	w, err := r.reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestLoopbackWorkerSyncAndRejoin(t *testing.T) {
	a := startRouter(t, "A", "127.0.0.1", 0, nil)
	b := startRouter(t, "B", "127.0.0.2", 0, nil, a)
	c := startRouter(t, "C", "127.0.0.3", 0, nil, a)
	for _, r := range []*router{a, b, c} {
		testutil.Eventually(t, r.name+" sees everyone ALIVE", func() bool {
			return r.status("A") == wire.StatusAlive && r.status("B") == wire.StatusAlive && r.status("C") == wire.StatusAlive
		})
	}

	w := addWorker(t, a, "http://10.7.0.1:8000", "secret-key")
	testutil.Eventually(t, "B and C import A's worker", func() bool { return b.hasWorker(w.URL) && c.hasWorker(w.URL) })
	if got := b.reg.Current().ByURL(w.URL); got.AuthHeader() != nil || got.Spec().APIKey != "" || got.Models[0] != "m" {
		t.Fatalf("imported worker carries %q / %q, models %v", got.AuthHeader(), got.Spec().APIKey, got.Models)
	}
	// B's own registration of a URL is never replaced, and a peer's delete of an import
	// does not remove it on the owner.
	if _, err := a.reg.Remove(context.Background(), w.ID); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "B and C drop it when A removes it", func() bool { return !b.hasWorker(w.URL) && !c.hasWorker(w.URL) })

	// Membership reaches C before B's sync stream does (C may learn everything from A), so
	// wait for both streams before stopping C and counting their ends.
	testutil.Eventually(t, "C accepted A's and B's sync streams", func() bool {
		var sb strings.Builder
		c.set.WritePrometheus(&sb)
		return strings.Contains(sb.String(), `router_mesh_peer_connections{peer="A"} 1`) &&
			strings.Contains(sb.String(), `router_mesh_peer_connections{peer="B"} 1`)
	})
	// Kill C: A and B mark it SUSPECTED, then DOWN.
	c.stop()
	testutil.Eventually(t, "C DOWN on A and B", func() bool {
		return a.status("C") == wire.StatusDown && b.status("C") == wire.StatusDown
	})
	for _, r := range []*router{a, b} {
		if n := r.set.GetOrCreateCounter(`smg_mesh_member_status_changes_total{to="SUSPECTED"}`).Get(); n == 0 {
			t.Fatalf("%s marked C DOWN without suspecting it first", r.name)
		}
	}
	// The spec's reconnect counter: C accepted the streams A and B opened, and counted their
	// ends when it stopped.
	var sb strings.Builder
	c.set.WritePrometheus(&sb)
	for _, peer := range []string{"A", "B"} {
		if !strings.Contains(sb.String(), `router_mesh_peer_reconnects_total{peer="`+peer+`"} 1`) {
			t.Fatalf("C did not count the end of %s's stream:\n%s", peer, sb.String())
		}
	}
	// Restart C under its old name at its old address: it rejoins on its own.
	c2 := startRouter(t, "C", "127.0.0.3", c.port, nil, a)
	testutil.Eventually(t, "restarted C ALIVE on A and B", func() bool {
		return a.status("C") == wire.StatusAlive && b.status("C") == wire.StatusAlive && c2.status("A") == wire.StatusAlive
	})
	w2 := addWorker(t, c2, "http://10.7.0.2:8000", "")
	testutil.Eventually(t, "the restarted router's worker reaches A and B", func() bool { return a.hasWorker(w2.URL) && b.hasWorker(w2.URL) })
}

func TestLoopbackMetrics(t *testing.T) {
	a := startRouter(t, "A", "127.0.0.1", 0, nil)
	b := startRouter(t, "B", "127.0.0.2", 0, nil, a)
	addWorker(t, a, "http://10.7.0.9:8000", "")
	testutil.Eventually(t, "B imports", func() bool { return b.hasWorker("http://10.7.0.9:8000") })
	var sb strings.Builder
	b.set.WritePrometheus(&sb)
	if !strings.Contains(sb.String(), `router_mesh_peer_connections{peer="A"} 1`) {
		t.Fatalf("B does not count the stream A opened:\n%s", sb.String())
	}
	sb.Reset()
	a.set.WritePrometheus(&sb)
	if !strings.Contains(sb.String(), `router_mesh_sync_round_duration_seconds_count{peer="B"}`) {
		t.Fatalf("A does not time its rounds to B:\n%s", sb.String())
	}
	st := a.mesh.Node().Status()
	if len(st.Members) != 2 || len(st.Streams) != 1 || st.Streams[0].Direction != "outbound" {
		t.Fatalf("status %+v", st)
	}
}

// rawCodec sends bytes as they are, to forge malformed messages.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return wire.Name }

func TestMalformedAndOversizedMessagesAreRejectedAndCounted(t *testing.T) {
	a := startRouter(t, "A", "127.0.0.1", 0, nil)
	conn, err := grpc.NewClient(a.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	var out []byte
	for _, bad := range [][]byte{{}, {1, 200}, {4, 0xff, 0xff, 0xff, 0xff, 0x0f}, make([]byte, wire.DefaultMaxMessage+10)} {
		if err := conn.Invoke(ctx, "/"+serviceName+"/Ping", bad, &out, grpc.ForceCodecV2(rawCodec{})); err == nil {
			t.Fatalf("a malformed message of %d bytes was accepted", len(bad))
		}
	}
	// A stream that sends garbage is closed; the router keeps serving.
	cs, err := conn.NewStream(ctx, &serviceDesc.Streams[0], "/"+serviceName+"/Sync", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.SendMsg([]byte{4, 9, 9, 9})
	_ = cs.RecvMsg(&out)
	testutil.Eventually(t, "every rejection counted", func() bool {
		var sb strings.Builder
		a.set.WritePrometheus(&sb)
		return strings.Contains(sb.String(), "smg_mesh_rejected_messages_total 5")
	})
	b := startRouter(t, "B", "127.0.0.2", 0, nil, a)
	testutil.Eventually(t, "A still serves", func() bool { return b.status("A") == wire.StatusAlive })
}

// writeCA makes a CA and a certificate it signs for name, and writes them as PEM files.
func writeCA(t *testing.T, dir, name string) (caCert *x509.Certificate, caKey *ecdsa.PrivateKey, caFile string) {
	t.Helper()
	caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ = x509.ParseCertificate(der)
	caFile = dir + "/" + name + "-ca.pem"
	writePEM(t, caFile, "CERTIFICATE", der)
	return caCert, caKey, caFile
}

func writeLeaf(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, caFile string) []string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := dir+"/"+name+".pem", dir+"/"+name+"-key.pem"
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return []string{certFile, keyFile, caFile}
}

func TestMutualTLSKeepsOutRoutersWithoutTheCA(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caFile := writeCA(t, dir, "cluster")
	rogueCA, rogueKey, rogueCAFile := writeCA(t, dir, "rogue")

	a := startRouter(t, "A", "127.0.0.1", 0, writeLeaf(t, dir, "a", ca, caKey, caFile))
	b := startRouter(t, "B", "127.0.0.2", 0, writeLeaf(t, dir, "b", ca, caKey, caFile), a)
	// C has a certificate from another CA (and trusts that CA); D has none.
	c := startRouter(t, "C", "127.0.0.3", 0, writeLeaf(t, dir, "c", rogueCA, rogueKey, rogueCAFile), a)
	d := startRouter(t, "D", "127.0.0.4", 0, nil, a)
	addWorker(t, c, "http://10.66.0.1:8000", "")
	addWorker(t, d, "http://10.66.0.2:8000", "")
	w := addWorker(t, a, "http://10.7.0.3:8000", "")

	testutil.Eventually(t, "A and B form the mesh and sync", func() bool { return b.status("A") == wire.StatusAlive && b.hasWorker(w.URL) })
	// Let the outsiders keep trying for a while: dozens of rounds.
	time.Sleep(time.Second)
	for _, r := range []*router{a, b} {
		if r.status("C") != wire.StatusInit || r.status("D") != wire.StatusInit {
			t.Fatalf("%s admitted an outsider: C %v, D %v", r.name, r.status("C"), r.status("D"))
		}
		if r.hasWorker("http://10.66.0.1:8000") || r.hasWorker("http://10.66.0.2:8000") {
			t.Fatalf("%s imported an outsider's worker", r.name)
		}
	}
	if c.hasWorker(w.URL) || d.hasWorker(w.URL) {
		t.Fatal("an outsider imported the cluster's worker")
	}
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := writeFile(file, typ, der); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMutualTLSErrors(t *testing.T) {
	if _, err := LoadMutualTLS("/nonexistent", "/nonexistent", "/nonexistent"); err == nil || !strings.Contains(err.Error(), "--mesh-tls-cert") {
		t.Fatalf("err = %v", err)
	}
}
