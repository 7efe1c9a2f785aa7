package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
)

// TestDiscoveredEnginesGetRoundRobinTraffic: pods on a real kube-apiserver are discovered by
// the real smg (--service-discovery), and round-robin traffic through the gateway reaches
// every discovered engine evenly.
// The pod annotations and worker label of the spec (service discovery, high availability),
// spelled out: these tests see the product as users do, not through the gateway's packages.
const (
	annotationWorkerPorts   = "smg.ai/worker-ports"
	annotationBootstrapPort = "sglang.ai/bootstrap-port"
	annotationMeshPort      = "sglang.ai/mesh-port"
	// annotationKVEventsPort and annotationKVEventsReplayPort are SMG-Go's: an HTTP engine's
	// KV-cache event sockets.
	annotationKVEventsPort       = "smg.ai/kv-events-port"
	annotationKVEventsReplayPort = "smg.ai/kv-events-replay-port"
	labelBootstrapPort           = "sglang.ai/bootstrap-port"
)

func TestDiscoveredEnginesGetRoundRobinTraffic(t *testing.T) {
	api, ns := startAPIServer(t, "rr")
	ctx := context.Background()
	mc := mockworker.DefaultConfig() // on 127.0.0.1
	mc.Count, mc.WorkerIDPrefix, mc.EventLoops = 4, "engine-", 1
	fleet := mockworkertest.Start(t, mc)
	var ports []string
	for _, a := range fleet.Addrs() {
		ports = append(ports, a[strings.LastIndexByte(a, ':')+1:])
	}
	// Two pods with two engines each.
	for i := range 2 {
		spec := k8stest.PodSpec{Namespace: ns, Name: "engine-pod-" + strconv.Itoa(i), Labels: map[string]string{"app": "sglang"},
			Annotations: map[string]string{annotationWorkerPorts: strings.Join(ports[2*i:2*i+2], ",")}}
		if _, err := api.ReadyPod(ctx, spec, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}

	// The real gateway, discovering through the API server with the admin kubeconfig.
	g := startGatewayEnv(t, []string{"KUBECONFIG=" + api.Kubeconfig},
		"--policy", "round_robin", "--service-discovery", "--selector", "app=sglang",
		"--service-discovery-namespace", ns)
	testutil.Eventually(t, "4 discovered workers ready in the gateway", func() bool {
		r, err := Do(http.MethodGet, g.URL+"/readiness", "", nil)
		return err == nil && r.Status == 200 && strings.Contains(r.Body, `"healthy_workers":4`)
	})
	if r := MustDo(t, http.MethodGet, g.URL+"/workers", "", nil); !strings.Contains(r.Body, "smg.ai/pod-name") {
		t.Fatalf("discovered workers lack their ownership labels: %s", r.Body)
	}

	hits := map[string]int{}
	for range 40 {
		r, err := Do(http.MethodPost, g.URL+"/v1/completions", `{"model":"mock-model","prompt":"hi","max_tokens":1}`, nil)
		if err != nil || r.Status != 200 {
			t.Fatalf("request through the gateway: %v %v", err, r)
		}
		hits[r.Header.Get("x-mock-worker-id")]++
	}
	if len(hits) != 4 {
		t.Fatalf("traffic reached %d engines, want all 4: %v", len(hits), hits)
	}
	for id, n := range hits {
		if n != 10 {
			t.Errorf("engine %s got %d of 40 requests, round robin gives 10 each: %v", id, n, hits)
		}
	}
}

// startAPIServer starts a real kube-apiserver with etcd for the test (stopped by its cleanup)
// and creates a fresh namespace named after prefix.
func startAPIServer(t *testing.T, prefix string) (*k8stest.Server, string) {
	t.Helper()
	api, err := k8stest.Start(func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	ns, err := api.Namespace(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return api, ns
}
