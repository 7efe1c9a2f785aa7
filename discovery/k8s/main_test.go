package k8s_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
	"github.com/smg-go/smg/worker"
)

// api is the real kube-apiserver every test in this package shares; each test works in its
// own namespace.
var api *k8stest.Server

func TestMain(m *testing.M) {
	var err error
	api, err = k8stest.Start(func(s string) { fmt.Fprintln(os.Stderr, s) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "discovery/k8s tests need a kube-apiserver:", err)
		os.Exit(1)
	}
	code := m.Run()
	api.Stop()
	os.Exit(code)
}

// gateway is a discovery instance over a real worker registry.
type gateway struct {
	reg  *worker.Registry
	disc *k8s.Discovery
	logs *syncbuf.Buffer
}

// testConfig is discovery with the test's namespace and short waits: the debounce and
// startup interval are shortened so tests finish fast, not to assert any timing.
func testConfig(ns string, selector ...string) discovery.Config {
	cfg := discovery.DefaultConfig()
	cfg.Enabled = true
	cfg.Namespace = ns
	cfg.Selector = selector
	cfg.Debounce = 50 * time.Millisecond
	cfg.WorkerStartupCheckInterval = 100 * time.Millisecond
	cfg.WorkerStartupTimeout = 10 * time.Second
	cfg.DrainSettle = 0
	return cfg
}

// startGateway starts a gateway whose registry and discovery log into g.logs, which a
// failed test prints.
func startGateway(t testing.TB, cfg discovery.Config, rc *rest.Config) *gateway {
	t.Helper()
	log, logs := testutil.Logger(slog.LevelInfo)
	g := startGatewayWith(t, cfg, rc, worker.DefaultConfig().WithLogger(log))
	g.logs = logs
	return g
}

// startGatewayWith is startGateway over a registry configured by regCfg; the registry and
// discovery both log to regCfg.Logger (g.logs is nil).
func startGatewayWith(t testing.TB, cfg discovery.Config, rc *rest.Config, regCfg worker.Config) *gateway {
	t.Helper()
	g := &gateway{}
	log := regCfg.Logger
	var err error
	g.reg, err = worker.NewRegistry(regCfg.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = log
	if rc == nil {
		rc = api.Config
	}
	g.disc, err = k8s.Start(context.Background(), cfg, g.reg, k8s.Options{RESTConfig: rc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.disc.Stop()
		g.reg.Close()
		if t.Failed() && g.logs != nil {
			t.Logf("gateway log:\n%s", tailString(g.logs.String(), 6000))
		}
	})
	return g
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// stop stops the gateway before the test ends (a restart).
func (g *gateway) stop() {
	g.disc.Stop()
	g.reg.Close()
}

// workers returns url → worker of the registry.
func (g *gateway) workers() map[string]*worker.Worker {
	out := map[string]*worker.Worker{}
	for _, w := range g.reg.Current().Workers {
		out[w.URL] = w
	}
	return out
}

// waitWorkers waits until the registry holds exactly the given URLs.
func (g *gateway) waitWorkers(t *testing.T, what string, urls ...string) {
	t.Helper()
	testutil.Eventually(t, what, func() bool {
		got := g.workers()
		if len(got) != len(urls) {
			return false
		}
		for _, u := range urls {
			if got[u] == nil {
				return false
			}
		}
		return true
	})
}

// engines starts n mock engines on 127.0.0.1 and returns their ports.
func engines(t testing.TB, n int) []int {
	t.Helper()
	mc := mockworker.DefaultConfig() // on 127.0.0.1
	mc.Count, mc.EventLoops = n, 1
	f := mockworkertest.Start(t, mc)
	var ports []int
	for _, a := range f.Addrs() {
		_, p, _ := strings.Cut(a, ":")
		n, _ := strconv.Atoi(p)
		ports = append(ports, n)
	}
	return ports
}

func portList(ports []int) string {
	var s []string
	for _, p := range ports {
		s = append(s, strconv.Itoa(p))
	}
	return strings.Join(s, ",")
}

func urlsOf(ports ...int) []string {
	var out []string
	for _, p := range ports {
		out = append(out, "http://127.0.0.1:"+strconv.Itoa(p))
	}
	return out
}

func namespace(t testing.TB) string {
	t.Helper()
	ns, err := api.Namespace(context.Background(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func startDiscovery(cfg discovery.Config, reg *worker.Registry) (*k8s.Discovery, error) {
	return k8s.Start(context.Background(), cfg, reg, k8s.Options{})
}
