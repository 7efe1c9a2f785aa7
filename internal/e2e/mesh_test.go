package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
)

// The mesh's real-process proofs: routers as `smg launch --enable-mesh` processes on
// 127.0.0.x loopback addresses, in network namespaces for the partition, and behind mutual
// TLS. Every wait logs the time it observed; the issue's claims ("within 3 s") are recorded
// figures, not bounds (no test asserts a duration, docs/architecture.md: on a shared machine a
// stalled core would fail them), so a wait fails only past testutil.Patience.

const (
	// meshPoll is how often a claim is polled.
	meshPoll = 50 * time.Millisecond
)

// meshRouter is one running `smg launch --enable-mesh`, restartable with the same flags.
type meshRouter struct {
	*Gateway
	name     string
	meshAddr string // the advertised IP:port peers dial
	netns    string // "" for the root namespace
	args     []string
	t        *testing.T
}

// meshRouterConfig is where one router listens and whom it dials.
type meshRouterConfig struct {
	name     string
	host     string // gateway and Prometheus IP
	meshHost string // mesh bind and advertise IP (default host)
	netns    string // run inside this network namespace
	peers    []string
	extra    []string
}

// startMeshRouter runs a router with --policy cache_aware, probing health every second, and
// waits for its /health.
func startMeshRouter(t *testing.T, c meshRouterConfig) *meshRouter {
	t.Helper()
	if c.meshHost == "" {
		c.meshHost = c.host
	}
	port, prom, meshPort := FreePort(t, "127.0.0.1"), FreePort(t, "127.0.0.1"), FreePort(t, "127.0.0.1")
	if c.netns == "" { // a free port on the address itself, which is what the router binds
		port, prom, meshPort = FreePort(t, c.host), FreePort(t, c.host), FreePort(t, c.meshHost)
	}
	args := []string{"launch", "--host", c.host, "--port", strconv.Itoa(port),
		"--prometheus-host", c.host, "--prometheus-port", strconv.Itoa(prom),
		"--policy", "cache_aware", "--health-check-interval-secs", "1", "--drain-settle-secs", "0",
		"--enable-mesh", "--mesh-server-name", c.name, "--mesh-host", c.meshHost,
		"--mesh-advertise-host", c.meshHost, "--mesh-port", strconv.Itoa(meshPort)}
	if len(c.peers) > 0 {
		args = append(append(args, "--mesh-peer-urls"), c.peers...)
	}
	args = append(args, c.extra...)
	r := &meshRouter{name: c.name, netns: c.netns, args: args, t: t,
		meshAddr: net.JoinHostPort(c.meshHost, strconv.Itoa(meshPort)),
		Gateway: &Gateway{URL: fmt.Sprintf("http://%s:%d", c.host, port),
			MetricsURL: fmt.Sprintf("http://%s:%d/metrics", c.host, prom)}}
	r.start()
	return r
}

func (r *meshRouter) start() {
	r.t.Helper()
	bin, args := Build(r.t).SMG, r.args
	if r.netns != "" {
		// ip netns exec execs the command, so the PID Start kills is the router's.
		bin, args = "ip", append([]string{"netns", "exec", r.netns, bin}, args...)
	}
	r.Process = Start(r.t, bin, args...)
	testutil.Eventually(r.t, r.name+" /health", func() bool {
		resp, err := Do("GET", r.URL+"/health", "", nil)
		return err == nil && resp.Status == 200
	})
}

// logStatusOnFailure logs every router's /mesh/status if the test fails. Call it after the
// routers started: cleanups run last-in first-out, so it runs before any of them is killed.
func logStatusOnFailure(t *testing.T, routers ...*meshRouter) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, r := range routers {
			if resp, err := Do("GET", r.URL+"/mesh/status", "", nil); err == nil {
				t.Logf("%s /mesh/status at the failure: %s", r.name, resp.Body)
			}
		}
	})
}

// kill SIGKILLs the router and waits for it to exit.
func (r *meshRouter) kill() {
	r.t.Helper()
	if err := r.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatalf("kill %s: %v", r.name, err)
	}
	select { // Wait's exit code is -1 for a killed process too: wait on done itself
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.t.Fatalf("%s did not exit after SIGKILL", r.name)
	}
}

// meshStatus is the body of GET /mesh/status.
type meshStatus struct {
	Members []struct {
		Name        string `json:"name"`
		Status      string `json:"status"`
		Incarnation uint64 `json:"incarnation"`
	} `json:"members"`
	Streams []meshStream `json:"streams"`
}

// meshStream is one open sync stream of /mesh/status.
type meshStream struct {
	Peer string `json:"peer"`
}

// status returns r's /mesh/status (empty when r does not answer).
func (r *meshRouter) status() meshStatus {
	var st meshStatus
	if resp, err := Do("GET", r.URL+"/mesh/status", "", nil); err == nil && resp.Status == 200 {
		_ = json.Unmarshal([]byte(resp.Body), &st)
	}
	return st
}

// streamWith reports whether r has a sync stream open with every peer. Tree deltas go only
// to the peers a router has a stream with when its round runs: a delta meant to start a
// repair is sent once the stream is there.
func (r *meshRouter) streamWith(peers ...*meshRouter) bool {
	st := r.status()
	for _, p := range peers {
		if !slices.ContainsFunc(st.Streams, func(s meshStream) bool { return s.Peer == p.name }) {
			return false
		}
	}
	return true
}

// member returns peer's status and incarnation as r sees them ("" when r does not know it,
// or r does not answer).
func (r *meshRouter) member(peer string) (string, uint64) {
	st := r.status()
	for _, m := range st.Members {
		if m.Name == peer {
			return m.Status, m.Incarnation
		}
	}
	return "", 0
}

// sees reports whether r lists every peer with status.
func (r *meshRouter) sees(status string, peers ...*meshRouter) bool {
	for _, p := range peers {
		if s, _ := r.member(p.name); s != status {
			return false
		}
	}
	return true
}

// workerStatus returns the worker API's view of url on r: listed, and whether it is healthy.
func (r *meshRouter) workerStatus(url string) (listed, healthy bool) {
	resp, err := Do("GET", r.URL+"/workers", "", nil)
	if err != nil || resp.Status != 200 {
		return false, false
	}
	var l struct {
		Workers []struct {
			URL       string `json:"url"`
			IsHealthy bool   `json:"is_healthy"`
		} `json:"workers"`
	}
	if json.Unmarshal([]byte(resp.Body), &l) != nil {
		return false, false
	}
	for _, w := range l.Workers {
		if w.URL == url {
			return true, w.IsHealthy
		}
	}
	return false, false
}

func (r *meshRouter) lists(url string) bool { listed, _ := r.workerStatus(url); return listed }

// serves reports whether r lists every url as healthy.
func (r *meshRouter) serves(urls ...string) bool {
	for _, u := range urls {
		if _, healthy := r.workerStatus(u); !healthy {
			return false
		}
	}
	return true
}

// addWorker registers url through r's worker API and returns its id.
func (r *meshRouter) addWorker(url string) string {
	r.t.Helper()
	resp := MustDo(r.t, "POST", r.URL+"/workers", `{"url":"`+url+`"}`, nil)
	var body struct {
		WorkerID string `json:"worker_id"`
	}
	if resp.Status != 202 || json.Unmarshal([]byte(resp.Body), &body) != nil || body.WorkerID == "" {
		r.t.Fatalf("POST %s/workers %s: %d %s", r.URL, url, resp.Status, resp.Body)
	}
	return body.WorkerID
}

// metric reads one series of r's Prometheus endpoint (0 when absent).
func (r *meshRouter) metric(series string) float64 {
	v, _ := Metric(r.t, r.MetricsURL, series)
	return v
}

// within waits for cond as testutil.Eventually does and logs how long it took, the figure a
// claim of the issue ("within 3 s") is read from.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	testutil.Eventually(t, what, cond)
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
}

// routeAll sends every prompt through g reps times and returns the worker each went to,
// failing when one prompt went to two workers.
func routeAll(t *testing.T, g *Gateway, prompts []string, reps int) []string {
	t.Helper()
	out := make([]string, len(prompts))
	for i, p := range prompts {
		for range reps {
			w := routed(t, g, chatWith(p), nil)
			if out[i] != "" && w != out[i] {
				t.Fatalf("prompt %d went to %s, then %s", i, out[i], w)
			}
			out[i] = w
		}
	}
	return out
}

// distinct counts the distinct values of ss.
func distinct(ss []string) int {
	c := slices.Clone(ss)
	slices.Sort(c)
	return len(slices.Compact(c))
}

// sameDecisions fails unless routing prompts through g picks want's workers.
func sameDecisions(t *testing.T, via string, g *Gateway, prompts, want []string) {
	t.Helper()
	got := routeAll(t, g, prompts, 1)
	diff := 0
	for i := range got {
		if got[i] != want[i] {
			diff++
			t.Errorf("prompt %d: %s routed it to %s, A to %s", i, via, got[i], want[i])
		}
	}
	t.Logf("%s made A's decision on %d of %d prompts", via, len(got)-diff, len(got))
}

const appliedDeltas = "smg_mesh_tree_deltas_applied_total"

// awaitDeltas waits until r has applied at least n tree deltas, then two more rounds, so
// that every delta of the routing before the call has arrived (deltas leave once per 1 s
// round, deduplicated per round, so the count alone does not say which arrived).
func awaitDeltas(t *testing.T, r *meshRouter, n float64) {
	t.Helper()
	within(t, r.name+" applied the cache_aware deltas", func() bool { return r.metric(appliedDeltas) >= n })
	time.Sleep(2 * time.Second)
}

// TestMeshRoutersOnLoopback: three routers on 127.0.0.1-3 share workers, cache_aware prefixes
// and membership; a killed router is suspected, then down, and rejoins under its name; a
// fresh router repairs its tree and routes like the others.
func TestMeshRoutersOnLoopback(t *testing.T) {
	t.Parallel()
	m := StartMocks(t, 4)
	static, added := m.URLs[:3], m.URLs[3]
	a := startMeshRouter(t, meshRouterConfig{name: "router-a", host: "127.0.0.1", extra: append([]string{"--worker-urls"}, static...)})
	b := startMeshRouter(t, meshRouterConfig{name: "router-b", host: "127.0.0.2", peers: []string{a.meshAddr}})
	c := startMeshRouter(t, meshRouterConfig{name: "router-c", host: "127.0.0.3", peers: []string{a.meshAddr}})
	all := []*meshRouter{a, b, c}
	logStatusOnFailure(t, all...)
	within(t, "cluster of 3 formed (every router sees the others ALIVE)", func() bool {
		return a.sees("ALIVE", b, c) && b.sees("ALIVE", a, c) && c.sees("ALIVE", a, b)
	})
	within(t, "A's --worker-urls healthy on B and C", func() bool { return b.serves(static...) && c.serves(static...) })

	// A worker added through A's API is on B and C within 3 s, and leaves them when A
	// removes it.
	id := a.addWorker(added)
	within(t, "worker added on A listed by B and C (the issue: within 3 s)", func() bool { return b.lists(added) && c.lists(added) })
	if r := MustDo(t, "DELETE", a.URL+"/workers/"+id, "", nil); r.Status != 202 {
		t.Fatalf("DELETE on A: %d %s", r.Status, r.Body)
	}
	within(t, "worker removed on A gone from B and C (the issue: within 3 s)", func() bool { return !b.lists(added) && !c.lists(added) })

	// cache_aware: prompts routed through A go to the same workers through B after a round.
	prompts := make([]string, 12)
	for i := range prompts {
		prompts[i] = longPrompt(100 + i)
	}
	decided := routeAll(t, a.Gateway, prompts, 3)
	if distinct(decided) < 2 {
		t.Fatalf("12 prompts all went to %v: the comparison below would prove nothing", decided)
	}
	awaitDeltas(t, b, float64(len(prompts)))
	sameDecisions(t, "B", b.Gateway, prompts, decided)

	// A fresh router D joins after the routing. Deltas carry only new decisions, so D learns
	// the earlier ones by repair, which the first delta it cannot place starts.
	joined := time.Now()
	d := startMeshRouter(t, meshRouterConfig{name: "router-d", host: "127.0.0.4", peers: []string{a.meshAddr}})
	logStatusOnFailure(t, d)
	within(t, "D joined (sees A, B, C ALIVE) with A's workers healthy", func() bool {
		return d.sees("ALIVE", a, b, c) && d.serves(static...)
	})
	within(t, "D has a sync stream with A", func() bool { return d.streamWith(a) })
	trigger := routeAll(t, a.Gateway, []string{longPrompt(200)}, 1)
	within(t, "D's cache tree repaired after the trigger prompt", func() bool {
		return d.metric(`smg_mesh_tree_repairs_total{result="complete"}`) >= 1
	})
	t.Logf("D: start to repaired: %v", time.Since(joined).Round(time.Millisecond))
	sameDecisions(t, "D", d.Gateway, append(prompts, longPrompt(200)), append(decided, trigger...))

	// Killing C: A and B suspect it, then mark it DOWN; C restarted under its old name is
	// ALIVE again with a higher incarnation and gets the workers back.
	_, before := a.member(c.name)
	observers := []*meshRouter{a, b}
	// Only C changes status from here, so each observer's status-change counters say whether
	// it went through SUSPECTED: polling alone can miss a SUSPECTED phase shorter than a poll
	// (A suspects C and broadcasts; B's next failed probe of the suspect makes it DOWN).
	var toSuspected, toDown [2]float64
	for i, r := range observers {
		toSuspected[i], toDown[i] = r.metric(suspectedChanges), r.metric(downChanges)
	}
	c.kill()
	killed := time.Now()
	suspected, down := make([]time.Duration, 2), make([]time.Duration, 2)
	within(t, "A and B see C DOWN", func() bool {
		for i, r := range observers {
			s, _ := r.member(c.name)
			if s == "SUSPECTED" && suspected[i] == 0 {
				suspected[i] = time.Since(killed)
			}
			if s == "DOWN" && down[i] == 0 {
				down[i] = time.Since(killed)
			}
		}
		return !slices.Contains(down, 0)
	})
	for i, r := range observers {
		if r.metric(suspectedChanges) <= toSuspected[i] || r.metric(downChanges) <= toDown[i] {
			t.Errorf("%s did not mark C SUSPECTED, then DOWN: status changes to SUSPECTED %v → %v, to DOWN %v → %v", r.name,
				toSuspected[i], r.metric(suspectedChanges), toDown[i], r.metric(downChanges))
		}
		seen := "not seen by polling (shorter than a poll)"
		if suspected[i] != 0 {
			seen = "after " + suspected[i].Round(time.Millisecond).String()
		}
		t.Logf("%s: C SUSPECTED %s, DOWN after %v", r.name, seen, down[i].Round(time.Millisecond))
	}
	_, downInc := a.member(c.name)
	c.start()
	within(t, "restarted C ALIVE on A and B", func() bool { return a.sees("ALIVE", c) && b.sees("ALIVE", c) })
	_, after := a.member(c.name)
	if after <= downInc {
		t.Errorf("C's incarnation on A: %d before the kill, %d when DOWN, %d after the restart: want above %d", before, downInc, after, downInc)
	}
	t.Logf("C's incarnation on A: %d before the kill, %d when DOWN, %d after rejoining", before, downInc, after)
	within(t, "restarted C serves A's workers", func() bool { return c.serves(static...) && c.sees("ALIVE", a, b, d) })
	for _, r := range all {
		if s, _ := r.member(d.name); s != "ALIVE" {
			t.Errorf("%s sees D %q", r.name, s)
		}
	}
}

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(serial.Add(1)) }

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a router certificate for ip (IP SAN, server and client use) signed by ca, with
// its key and the CA bundle trusted, into dir; it returns the three --mesh-tls-* flags.
func (ca *testCA) issue(t *testing.T, dir, name, ip string, trusted *testCA) []string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(ip)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		name + ".crt":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		name + ".key":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		name + "-ca.crt": trusted.pem,
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--mesh-tls-cert", filepath.Join(dir, name+".crt"),
		"--mesh-tls-key", filepath.Join(dir, name+".key"), "--mesh-tls-ca", filepath.Join(dir, name+"-ca.crt")}
}

// TestMeshMutualTLSRefusesARouterOutsideTheCA: A and B hold certificates of the cluster CA; C
// holds one of another CA (and trusts the cluster CA, so the only thing it lacks is a
// certificate the cluster signed). C dials A, B dials C: C never joins, and a worker added
// on C never reaches A or B, while one added on B reaches A.
func TestMeshMutualTLSRefusesARouterOutsideTheCA(t *testing.T) {
	t.Parallel()
	m := StartMocks(t, 2)
	dir := t.TempDir()
	cluster, rogue := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	a := startMeshRouter(t, meshRouterConfig{name: "tls-a", host: "127.0.0.1",
		extra: cluster.issue(t, dir, "a", "127.0.0.1", cluster)})
	c := startMeshRouter(t, meshRouterConfig{name: "tls-c", host: "127.0.0.3", peers: []string{a.meshAddr},
		extra: rogue.issue(t, dir, "c", "127.0.0.3", cluster)})
	b := startMeshRouter(t, meshRouterConfig{name: "tls-b", host: "127.0.0.2", peers: []string{a.meshAddr, c.meshAddr},
		extra: cluster.issue(t, dir, "b", "127.0.0.2", cluster)})
	logStatusOnFailure(t, a, b, c)

	fromC, fromB := m.URLs[0], m.URLs[1]
	c.addWorker(fromC)
	b.addWorker(fromB)
	within(t, "A and B see each other ALIVE over mutual TLS", func() bool {
		return a.sees("ALIVE", b) && b.sees("ALIVE", a)
	})
	within(t, "worker added on B listed by A (the issue: within 3 s)", func() bool { return a.lists(fromB) })
	// Several more rounds for C: B has dialled it with backoff, C has dialled A.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range []*meshRouter{a, b} {
			if s, _ := r.member(c.name); s == "ALIVE" {
				t.Fatalf("%s lists %s ALIVE: a router without the cluster CA's certificate joined", r.name, c.name)
			}
			if r.lists(fromC) {
				t.Fatalf("%s lists %s, published by %s without the cluster CA's certificate", r.name, fromC, c.name)
			}
		}
		if s, _ := c.member(a.name); s == "ALIVE" {
			t.Fatalf("%s sees %s ALIVE: it reached A's mesh", c.name, a.name)
		}
		time.Sleep(meshPoll)
	}
	// Both refusals are the certificate's, not an unrelated failure: A's TLS alert reached C,
	// and B's own check of C's certificate failed.
	if !strings.Contains(c.Output(), "bad certificate") {
		t.Errorf("C's dials of A did not fail on A's refusal of its certificate:\n%s", tail(c.Output(), 3000))
	}
	if !strings.Contains(b.Output(), "not signed by the cluster CA") {
		t.Errorf("B's dials of C did not fail on C's certificate:\n%s", tail(b.Output(), 3000))
	}
	// The refusing side says so too: A logs C's refused handshakes and why. (The remote
	// address is C's dial source, which the kernel picks: not asserted.)
	if out := a.Output(); !strings.Contains(out, "refused a mesh connection: TLS handshake failed") || !strings.Contains(out, "not signed by the cluster CA") {
		t.Errorf("A did not log its refusal of C's handshake:\n%s", tail(out, 3000))
	}
}

// netLab is a set of network namespaces joined by two bridges in the root namespace: a
// service network (clients in the root namespace, the mock workers, every router's HTTP
// port) and a mesh network (router to router only). Cutting a router's mesh link partitions
// it from the other routers while it keeps serving its clients with the workers, which is
// what a partition between routers means for a gateway. Every name carries the test
// process's PID, so parallel runs on one machine do not collide.
type netLab struct {
	t                 *testing.T
	pid               int
	svcBridge, bridge string
	prefix            string // "10.H.L." of this lab's /24
}

// ip runs `ip args...` and returns its error with its output.
func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetLab makes the two bridges, or skips the test when this machine cannot make network
// namespaces (the only skip in the suite: it needs root and iproute2).
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	pid := os.Getpid()
	l := &netLab{t: t, pid: pid, svcBridge: fmt.Sprintf("smgs%d", pid), bridge: fmt.Sprintf("smgm%d", pid),
		prefix: fmt.Sprintf("10.%d.%d.", 100+(pid>>8)%100, pid&0xff)}
	if os.Geteuid() != 0 {
		t.Skipf("network namespaces need root; running as uid %d", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("network namespaces need iproute2's ip command: %v", err)
	}
	probe := fmt.Sprintf("smg-%d-probe", pid)
	if err := ip("netns", "add", probe); err != nil {
		t.Skipf("cannot make a network namespace: %v", err)
	}
	if err := ip("netns", "del", probe); err != nil {
		t.Fatal(err)
	}
	for _, br := range []string{l.svcBridge, l.bridge} {
		t.Cleanup(func() { _ = ip("link", "del", br) })
		l.must("link", "add", br, "type", "bridge")
		l.must("link", "set", br, "up")
	}
	// The root namespace is on the service network only: it reaches the routers' HTTP
	// ports and hosts the mock workers, never the mesh.
	l.must("addr", "add", l.prefix+"100/25", "dev", l.svcBridge)
	return l
}

func (l *netLab) must(args ...string) {
	l.t.Helper()
	if err := ip(args...); err != nil {
		l.t.Fatal(err)
	}
}

// meshLink is the root-side name of node's mesh veth; setting it down cuts node off the mesh.
func (l *netLab) meshLink(node string) string { return fmt.Sprintf("vm%d%s", l.pid, node) }

// addNode makes namespace smg-<pid>-<node> with service address .i and mesh address .128+i,
// and returns the namespace's name and both addresses.
func (l *netLab) addNode(node string, i int) (ns, svcIP, meshIP string) {
	l.t.Helper()
	ns = fmt.Sprintf("smg-%d-%s", l.pid, node)
	svcIP, meshIP = l.prefix+strconv.Itoa(i), l.prefix+strconv.Itoa(128+i)
	svcLink := fmt.Sprintf("vs%d%s", l.pid, node)
	l.t.Cleanup(func() {
		// The namespace's end of each veth goes with the namespace, asynchronously: delete
		// the root ends by name too.
		_ = ip("netns", "del", ns)
		_ = ip("link", "del", svcLink)
		_ = ip("link", "del", l.meshLink(node))
	})
	l.must("netns", "add", ns)
	l.must("-n", ns, "link", "set", "lo", "up")
	for _, n := range []struct{ root, inside, bridge, addr string }{
		{svcLink, "svc0", l.svcBridge, svcIP + "/25"},
		{l.meshLink(node), "mesh0", l.bridge, meshIP + "/25"},
	} {
		l.must("link", "add", n.root, "type", "veth", "peer", "name", n.inside, "netns", ns)
		l.must("link", "set", n.root, "master", n.bridge, "up")
		l.must("-n", ns, "addr", "add", n.addr, "dev", n.inside)
		l.must("-n", ns, "link", "set", n.inside, "up")
	}
	return ns, svcIP, meshIP
}

// startMocks runs n mock workers on the service network in the root namespace.
func (l *netLab) startMocks(n int) []string {
	l.t.Helper()
	p := Start(l.t, Build(l.t).MockWorker, "--host", l.prefix+"100", "--port", "0", "--count", strconv.Itoa(n))
	var urls []string
	testutil.Eventually(l.t, "mock workers listening", func() bool {
		urls = urls[:0]
		for _, match := range listeningLine.FindAllStringSubmatch(p.Output(), -1) {
			urls = append(urls, match[1])
		}
		return len(urls) == n
	})
	return urls
}

// TestMeshPartitionInNetworkNamespaces: routers A, B, C in their own namespaces; the mesh
// links split {A} from {B, C}. Both sides keep routing on what they have and mark the other
// side DOWN; workers added on each side during the split reach the other after the heal.
func TestMeshPartitionInNetworkNamespaces(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t)
	mocks := lab.startMocks(7)
	static, onA, onB := mocks[:3], mocks[3], mocks[4]
	var routers []*meshRouter
	for i, name := range []string{"a", "b", "c"} {
		ns, svcIP, meshIP := lab.addNode(name, i+1)
		c := meshRouterConfig{name: "router-" + name, host: svcIP, meshHost: meshIP, netns: ns}
		if i == 0 {
			c.extra = append(c.extra, append([]string{"--worker-urls"}, static...)...)
		} else {
			c.peers = []string{routers[0].meshAddr}
		}
		routers = append(routers, startMeshRouter(t, c))
	}
	a, b, c := routers[0], routers[1], routers[2]
	logStatusOnFailure(t, routers...)
	within(t, "cluster of 3 formed across namespaces", func() bool {
		return a.sees("ALIVE", b, c) && b.sees("ALIVE", a, c) && c.sees("ALIVE", a, b)
	})
	within(t, "A's workers healthy on B and C", func() bool { return b.serves(static...) && c.serves(static...) })
	prompts := make([]string, 8)
	for i := range prompts {
		prompts[i] = longPrompt(300 + i)
	}
	decided := routeAll(t, a.Gateway, prompts, 2)
	if distinct(decided) < 2 {
		t.Fatalf("8 prompts all went to %v: the comparisons below would prove nothing", decided)
	}
	awaitDeltas(t, b, float64(len(prompts)))
	awaitDeltas(t, c, float64(len(prompts)))

	// Split: A's mesh link goes down; its service link stays up.
	repairsBefore := a.metric(repairsComplete)
	lab.must("link", "set", lab.meshLink("a"), "down")
	split := time.Now()
	// Each observer's first sight of the other side SUSPECTED and DOWN, polled in one loop.
	observers := []struct {
		r     *meshRouter
		other []*meshRouter
	}{{a, []*meshRouter{b, c}}, {b, []*meshRouter{a}}, {c, []*meshRouter{a}}}
	suspected, down := make([]time.Duration, 3), make([]time.Duration, 3)
	within(t, "both sides mark the other DOWN", func() bool {
		for i, o := range observers {
			if suspected[i] == 0 && (o.r.sees("SUSPECTED", o.other...) || o.r.sees("DOWN", o.other...)) {
				suspected[i] = time.Since(split)
			}
			if down[i] == 0 && o.r.sees("DOWN", o.other...) {
				down[i] = time.Since(split)
			}
		}
		return !slices.Contains(down, 0) && b.sees("ALIVE", c) && c.sees("ALIVE", b)
	})
	for i, o := range observers {
		t.Logf("split: %s saw the other side SUSPECTED (or DOWN) after %v, DOWN after %v", o.r.name,
			suspected[i].Round(time.Millisecond), down[i].Round(time.Millisecond))
	}
	// Both sides serve with their state: the cache_aware decisions made before the split,
	// and each side's own new worker.
	for _, r := range routers {
		sameDecisions(t, r.name+" (split)", r.Gateway, prompts, decided)
	}
	a.addWorker(onA)
	b.addWorker(onB)
	within(t, "each side's new worker healthy on its own side", func() bool {
		return a.serves(onA) && b.serves(onB) && c.serves(onB)
	})
	for _, r := range routers {
		if got, want := r.lists(onA), r == a; got != want {
			t.Errorf("during the split, %s lists A's new worker: %v", r.name, got)
		}
		if got, want := r.lists(onB), r != a; got != want {
			t.Errorf("during the split, %s lists B's new worker: %v", r.name, got)
		}
	}
	// A cache_aware decision on each side during the split (B's reaches C at once).
	splitB, splitA := longPrompt(400), longPrompt(410)
	cApplied := c.metric(appliedDeltas)
	decidedB := routeAll(t, b.Gateway, []string{splitB}, 1)
	decidedA := routeAll(t, a.Gateway, []string{splitA}, 1)
	awaitDeltas(t, c, cApplied+1)
	t.Logf("split for %v", time.Since(split).Round(time.Millisecond))

	lab.must("link", "set", lab.meshLink("a"), "up")
	within(t, "after the heal: membership converged (every router sees the others ALIVE)", func() bool {
		return a.sees("ALIVE", b, c) && b.sees("ALIVE", a, c) && c.sees("ALIVE", a, b)
	})
	within(t, "after membership: worker state converged (both new workers healthy everywhere)", func() bool {
		return a.serves(onA, onB) && b.serves(onA, onB) && c.serves(onA, onB)
	})
	// The healed cluster syncs again: a worker added now on either side reaches the other
	// within the issue's 3 s.
	a.addWorker(mocks[5])
	within(t, "after the heal: a worker added on A listed by B and C (the issue: within 3 s)", func() bool { return b.lists(mocks[5]) && c.lists(mocks[5]) })
	b.addWorker(mocks[6])
	within(t, "after the heal: a worker added on B listed by A (the issue: within 3 s)", func() bool { return a.lists(mocks[6]) })

	// Cache trees: a rejoining peer clears the repaired mark, and the first delta a router
	// cannot place starts a repair from a random peer. A's peers both hold B's split-time
	// decision, so A learns it whichever it picks.
	within(t, "after the heal: A has sync streams with B and C", func() bool { return a.streamWith(b, c) })
	triggerB := routeAll(t, b.Gateway, []string{longPrompt(401)}, 1)
	within(t, "after the heal: A repaired its cache tree", func() bool {
		return a.metric(repairsComplete) > repairsBefore
	})
	sameDecisions(t, "A (healed)", a.Gateway, []string{splitB, longPrompt(401)}, append(decidedB, triggerB...))
	// B and C learn A's split-time decision only when they repair from A itself, or from
	// the other after it did: best effort, measured and not asserted (docs/mesh.md).
	within(t, "B and C have sync streams with A", func() bool { return b.streamWith(a) && c.streamWith(a) })
	routeAll(t, a.Gateway, []string{longPrompt(402)}, 1) // a delta B and C cannot place
	time.Sleep(2 * time.Second)
	for _, r := range []*meshRouter{b, c} {
		got := routeAll(t, r.Gateway, []string{splitA}, 1)
		t.Logf("after the heal: %s routes A's split-time prompt like A: %v (its repairs: %s)",
			r.name, got[0] == decidedA[0], repairSources(r.Output()))
	}
}

const (
	suspectedChanges = `smg_mesh_member_status_changes_total{to="SUSPECTED"}`
	downChanges      = `smg_mesh_member_status_changes_total{to="DOWN"}`
)

const repairsComplete = `smg_mesh_tree_repairs_total{result="complete"}`

// repairSources lists the peers a router's log says it repaired its cache tree from.
func repairSources(log string) string {
	var peers []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "cache tree repaired from peer") {
			if _, p, ok := strings.Cut(line, " peer="); ok {
				peers = append(peers, strings.Fields(p)[0])
			}
		}
	}
	return strings.Join(peers, ", ")
}
