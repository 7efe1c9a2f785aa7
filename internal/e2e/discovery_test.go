package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/policy/roundrobin"
	"github.com/smg-go/smg/worker"
)

// TestDiscoveredEnginesGetRoundRobinTraffic: pods on a real kube-apiserver → discovery → the
// worker registry → the round_robin policy → requests sent to each picked worker reach
// every discovered engine. (The --service-discovery path through cmd/smg is wired by the
// gateway assembly; this test drives the same packages in-process.)
func TestDiscoveredEnginesGetRoundRobinTraffic(t *testing.T) {
	api, err := k8stest.Start(func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	defer api.Stop()
	ctx := context.Background()
	ns, err := api.Namespace(ctx, "rr")
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := mockworker.Start(mockworker.Config{Host: "127.0.0.1", Count: 4, WorkerIDPrefix: "engine-", EventLoops: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	var ports []string
	for _, a := range fleet.Addrs() {
		ports = append(ports, a[strings.LastIndexByte(a, ':')+1:])
	}
	// Two pods with two engines each.
	for i := range 2 {
		spec := k8stest.PodSpec{Namespace: ns, Name: "engine-pod-" + strconv.Itoa(i), Labels: map[string]string{"app": "sglang"},
			Annotations: map[string]string{discovery.AnnotationWorkerPorts: strings.Join(ports[2*i:2*i+2], ",")}}
		if _, err := api.ReadyPod(ctx, spec, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}

	log := slog.New(slog.DiscardHandler)
	reg, err := worker.NewRegistry(worker.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	router, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: roundrobin.Name, NewBuilder: all.NewBuilderFunc(all.DefaultConfig()), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg.Subscribe(router.Update)
	cfg := discovery.DefaultConfig()
	cfg.Enabled, cfg.Namespace, cfg.Selector, cfg.Logger = true, ns, []string{"app=sglang"}, log
	cfg.Debounce = 50 * time.Millisecond
	d, err := k8s.Start(ctx, cfg, reg, k8s.Options{RESTConfig: api.Config})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	Eventually(t, 60*time.Second, "4 routable discovered workers", func() bool {
		route, ok := router.Current().Lookup([]byte(mockworker.DefaultModel))
		return ok && len(route.Candidates) == 4
	})

	hits := map[string]int{}
	for range 40 {
		route, _ := router.Current().Lookup([]byte(mockworker.DefaultModel))
		res, err := route.Picker.Pick(&policy.Request{Model: []byte(mockworker.DefaultModel)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Do(http.MethodPost, res.Worker.URL+"/v1/completions", `{"model":"mock-model","prompt":"hi","max_tokens":1}`, nil)
		if err != nil || r.Status != 200 {
			t.Fatalf("request to %s: %v %v", res.Worker.URL, err, r)
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
