package k8s_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

func TestRouterDiscoveryMembership(t *testing.T) {
	ns := namespace(t)
	var mu sync.Mutex
	latest := map[string]discovery.Member{}
	cfg := testConfig(ns, "app=sglang")
	cfg.RouterSelector, cfg.MeshEnabled, cfg.MeshPort = []string{"app=smg"}, true, 39527
	var logs *syncbuf.Buffer
	cfg.Logger, logs = testutil.Logger(slog.LevelInfo)
	reg, _ := worker.NewRegistry(worker.DefaultConfig().WithLogger(cfg.Logger))
	defer reg.Close()
	d, err := k8s.Start(ctx, cfg, reg, k8s.Options{RESTConfig: api.Config, OnRouterChange: func(ms []discovery.Member) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			latest[m.Name] = m
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	status := func(name string) discovery.Member {
		mu.Lock()
		defer mu.Unlock()
		return latest[name]
	}
	router := func(name string, ann map[string]string) k8stest.PodSpec {
		return k8stest.PodSpec{Namespace: ns, Name: name, Labels: map[string]string{"app": "smg"}, Annotations: ann}
	}
	must[*corev1.Pod](t)(api.ReadyPod(ctx, router("smg-0", map[string]string{discovery.AnnotationMeshPort: "40001"}), "127.0.0.2"))
	must[*corev1.Pod](t)(api.ReadyPod(ctx, router("smg-1", nil), "127.0.0.3"))
	testutil.Eventually(t, "both routers ALIVE", func() bool {
		return status("smg-0") == discovery.Member{Name: "smg-0", UID: status("smg-0").UID, Addr: "127.0.0.2:40001", Status: discovery.MemberAlive} &&
			status("smg-1").Addr == "127.0.0.3:39527" && status("smg-1").Status == discovery.MemberAlive
	})
	must[*corev1.Pod](t)(api.SetStatus(ctx, ns, "smg-1", "127.0.0.3", true, false))
	testutil.Eventually(t, "unready router SUSPECTED", func() bool { return status("smg-1").Status == discovery.MemberSuspected })
	if err := api.DeletePod(ctx, ns, "smg-0", 30); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "terminating router DOWN", func() bool { return status("smg-0").Status == discovery.MemberDown })
	if err := api.DeletePod(ctx, ns, "smg-1", 0); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "deleted router DOWN", func() bool { return status("smg-1").Status == discovery.MemberDown })
	_ = api.DeletePod(ctx, ns, "smg-0", 0)
	if len(reg.Current().Workers) != 0 {
		t.Fatal("router pods were registered as workers")
	}
	if !strings.Contains(logs.String(), `msg="Router node discovery enabled" selector="app=smg"`) {
		t.Errorf("log lacks the spec's router discovery line:\n%s", logs.String())
	}
}

func TestRouterDiscoveryNeedsMesh(t *testing.T) {
	ns := namespace(t)
	cfg := testConfig(ns, "app=sglang")
	cfg.RouterSelector = []string{"app=smg"}
	var logs *syncbuf.Buffer
	cfg.Logger, logs = testutil.Logger(slog.LevelInfo)
	reg, _ := worker.NewRegistry(worker.DefaultConfig().WithLogger(cfg.Logger))
	defer reg.Close()
	d, err := k8s.Start(ctx, cfg, reg, k8s.Options{RESTConfig: api.Config})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	if out := logs.String(); !strings.Contains(out, "Router selector configured but mesh is not enabled") || strings.Contains(out, "Router node discovery enabled") {
		t.Fatalf("log:\n%s", out)
	}
}
