package k8s_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
	"github.com/smg-go/smg/worker"
)

var ctx = context.Background()

func TestMultiPortPodAndAnnotationEdits(t *testing.T) {
	ns := namespace(t)
	ports := engines(t, 4)
	g := startGateway(t, testConfig(ns, "app=sglang"), nil)
	pod := must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "multi-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: portList(ports)}}, "127.0.0.1"))
	g.waitWorkers(t, "4 workers of the multi-port pod", urlsOf(ports...)...)
	for _, w := range g.workers() {
		if w.Label(discovery.LabelPodName) != "multi-0" || w.Label(discovery.LabelPodUID) != string(pod.UID) ||
			w.Label(discovery.LabelDiscovered) != "true" || w.Status() != worker.StatusReady {
			t.Fatalf("worker %s: labels %v status %v", w.URL, w.Spec().Labels, w.Status())
		}
		if len(w.Models) != 1 || w.Models[0] != mockworker.DefaultModel {
			t.Fatalf("worker %s: models %v, want the engine's", w.URL, w.Models)
		}
	}
	setPorts := func(list string) {
		patch := `{"metadata":{"annotations":{"` + discovery.AnnotationWorkerPorts + `":"` + list + `"}}}`
		must[*corev1.Pod](t)(api.Client.CoreV1().Pods(ns).Patch(ctx, "multi-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}))
	}
	setPorts(portList(ports[:2]))
	g.waitWorkers(t, "2 workers after the edit to 2 ports", urlsOf(ports[:2]...)...)
	setPorts(portList(ports))
	g.waitWorkers(t, "4 workers after the edit back to 4 ports", urlsOf(ports...)...)
	for _, line := range []string{
		"Starting K8s service discovery | selector: 'app=sglang'",
		"Starting K8s worker watcher | selector: 'app=sglang'",
		"K8s worker store synced, reconciling on change and every 60s",
		"Reconciling workers: 4 to add, 0 to remove (4 desired)",
		"Registering worker 127.0.0.1:" + strconv.Itoa(ports[0]) + " (Regular) for pod multi-0",
		"Reconciling workers: 0 to add, 2 to remove (2 desired)",
	} {
		if !strings.Contains(g.logs.String(), line) {
			t.Errorf("log lacks %q", line)
		}
	}
}

func TestReadinessRegistersAndRemoves(t *testing.T) {
	ns := namespace(t)
	port := engines(t, 1)[0]
	g := startGateway(t, testConfig(ns, "app=sglang"), nil)
	spec := k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(port)}}
	must[*corev1.Pod](t)(api.CreatePod(ctx, spec))
	must[*corev1.Pod](t)(api.SetStatus(ctx, ns, "w-0", "127.0.0.1", true, false))
	// Running with an IP but not Ready: a pass runs (the status change woke it) and adds nothing.
	testutil.Eventually(t, "a pass over the unready pod", func() bool { return strings.Contains(g.logs.String(), "K8s worker store synced") })
	g.disc.Reconciler.Pass(ctx)
	if n := len(g.workers()); n != 0 {
		t.Fatalf("%d workers for an unready pod", n)
	}
	must[*corev1.Pod](t)(api.SetStatus(ctx, ns, "w-0", "127.0.0.1", true, true))
	g.waitWorkers(t, "registered once Ready", urlsOf(port)...)
	must[*corev1.Pod](t)(api.SetStatus(ctx, ns, "w-0", "127.0.0.1", true, false))
	g.waitWorkers(t, "removed once unready")
	must[*corev1.Pod](t)(api.SetStatus(ctx, ns, "w-0", "127.0.0.1", true, true))
	g.waitWorkers(t, "registered again", urlsOf(port)...)
	// No longer matching the selector.
	must[*corev1.Pod](t)(api.Client.CoreV1().Pods(ns).Patch(ctx, "w-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{}))
	g.waitWorkers(t, "removed once the labels stop matching")
}

func TestTerminatingPodDrainsThenForceDeleteIsGone(t *testing.T) {
	ns := namespace(t)
	ports := engines(t, 2)
	cfg := testConfig(ns, "app=sglang")
	cfg.DrainSettle = time.Second
	g := startGateway(t, cfg, nil)
	for i, p := range ports {
		must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-" + strconv.Itoa(i), Labels: map[string]string{"app": "sglang"},
			Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(p)}}, "127.0.0.1"))
	}
	g.waitWorkers(t, "both registered", urlsOf(ports...)...)
	drained := urlsOf(ports[0])[0]
	if err := api.DeletePod(ctx, ns, "w-0", 30); err != nil {
		t.Fatal(err)
	}
	// Terminating: the worker drains (still registered, no new requests) for the settle window.
	testutil.Eventually(t, "draining", func() bool {
		w := g.workers()[drained]
		return w != nil && w.Status() == worker.StatusDraining
	})
	// The reconciler logs the drain right after it marks the worker draining.
	testutil.Eventually(t, "the drain line logged", func() bool {
		return strings.Contains(g.logs.String(), "Draining 1 worker(s) for 1s before removal")
	})
	g.waitWorkers(t, "removed after the settle window", urlsOf(ports[1])...)
	// The pod is still Terminating in the API: the worker stays gone on later passes.
	g.disc.Reconciler.Pass(ctx)
	if len(g.workers()) != 1 {
		t.Fatal("a terminating pod was registered again")
	}
	// Force delete of the other pod (grace 0): gone at once, no Terminating phase.
	if err := api.DeletePod(ctx, ns, "w-1", 0); err != nil {
		t.Fatal(err)
	}
	g.waitWorkers(t, "force-deleted pod's worker gone")
	_ = api.DeletePod(ctx, ns, "w-0", 0)
}

func TestAPIWorkerSurvivesEveryPass(t *testing.T) {
	ns := namespace(t)
	ports := engines(t, 3)
	g := startGateway(t, testConfig(ns, "app=sglang"), nil)
	// One worker from the API at an address a pod also claims, one that carries discovery's
	// labels as a mesh peer's would, one unrelated.
	var foreign []string
	for i, labels := range []map[string]string{nil, {discovery.LabelPodUID: "peer", discovery.LabelDiscovered: "true"}, nil} {
		spec := worker.Spec{URL: urlsOf(ports[i])[0], Labels: labels}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		must[*worker.Worker](t)(g.reg.Add(ctx, spec, worker.StatusReady))
		foreign = append(foreign, spec.URL)
	}
	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(ports[0])}}, "127.0.0.1"))
	testutil.Eventually(t, "store synced", func() bool { return strings.Contains(g.logs.String(), "K8s worker store synced") })
	for range 3 {
		g.disc.Reconciler.Pass(ctx)
	}
	if err := api.DeletePod(ctx, ns, "w-0", 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		g.disc.Reconciler.Pass(ctx)
	}
	if q := g.disc.Reconciler.Queue().Len(); q != 0 {
		t.Fatalf("%d jobs submitted over foreign workers", q)
	}
	g.waitWorkers(t, "foreign workers untouched", foreign...)
}

func TestPodDeletedWhileWatchCutIsRemovedAfterRecovery(t *testing.T) {
	ns := namespace(t)
	ports := engines(t, 2)
	proxy, err := k8stest.NewProxy(api.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	g := startGateway(t, testConfig(ns, "app=sglang"), api.Via(proxy.Addr()))
	for i, p := range ports {
		must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-" + strconv.Itoa(i), Labels: map[string]string{"app": "sglang"},
			Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(p)}}, "127.0.0.1"))
	}
	g.waitWorkers(t, "both registered", urlsOf(ports...)...)
	proxy.Cut()
	if err := api.DeletePod(ctx, ns, "w-0", 0); err != nil {
		t.Fatal(err)
	}
	// While the watch is down the cache still holds the pod: passes from the cache keep it.
	g.disc.Reconciler.Pass(ctx)
	if len(g.workers()) != 2 {
		t.Fatal("a worker was removed without the gateway seeing its pod go")
	}
	testutil.Eventually(t, "a reconnection refused while cut", func() bool { return proxy.Refused() > 0 })
	g.disc.Reconciler.Pass(ctx)
	if len(g.workers()) != 2 {
		t.Fatal("a worker was removed without the gateway seeing its pod go")
	}
	proxy.Restore()
	g.waitWorkers(t, "the deleted pod's worker removed after recovery", urlsOf(ports[1])...)
}

func TestRegistrationRetriedUntilEngineStarts(t *testing.T) {
	ns := namespace(t)
	port := freePort(t)
	cfg := testConfig(ns, "app=sglang")
	cfg.WorkerStartupTimeout = 300 * time.Millisecond
	g := startGateway(t, cfg, nil)
	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(port)}}, "127.0.0.1"))
	testutil.Eventually(t, "a failed registration", func() bool {
		return strings.Contains(g.logs.String(), "Worker did not answer before --worker-startup-timeout-secs")
	})
	if len(g.workers()) != 0 {
		t.Fatal("registered a worker whose engine is down")
	}
	mc := mockworker.DefaultConfig() // on 127.0.0.1
	mc.Port, mc.EventLoops = port, 1
	mockworkertest.Start(t, mc)
	g.waitWorkers(t, "registered once the engine answers", urlsOf(port)...)
}

func TestGatewayRestartRebuildsRegistry(t *testing.T) {
	ns := namespace(t)
	ports := engines(t, 3)
	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: portList(ports)}}, "127.0.0.1"))
	first := startGateway(t, testConfig(ns, "app=sglang"), nil)
	first.waitWorkers(t, "first gateway", urlsOf(ports...)...)
	first.stop()
	second := startGateway(t, testConfig(ns, "app=sglang"), nil)
	second.waitWorkers(t, "restarted gateway", urlsOf(ports...)...)
}

func TestNamespaceScoping(t *testing.T) {
	nsA, nsB := namespace(t), namespace(t)
	ports := engines(t, 2)
	for i, ns := range []string{nsA, nsB} {
		must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "scoped"},
			Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(ports[i])}}, "127.0.0.1"))
	}
	scoped := startGateway(t, testConfig(nsA, "app=scoped"), nil)
	all := startGateway(t, testConfig("", "app=scoped"), nil)
	all.waitWorkers(t, "all namespaces", urlsOf(ports...)...)
	scoped.waitWorkers(t, "one namespace", urlsOf(ports[0])...)
	scoped.disc.Reconciler.Pass(ctx)
	if len(scoped.workers()) != 1 {
		t.Fatal("namespace-scoped discovery registered a pod of another namespace")
	}
}

func TestPDRolesAndBootstrapPorts(t *testing.T) {
	ns := namespace(t)
	ports := engines(t, 4)
	cfg := testConfig(ns)
	cfg.PrefillSelector = []string{"app=vllm", "role=prefill"}
	cfg.DecodeSelector = []string{"app=vllm", "role=decode"}
	g := startGateway(t, cfg, nil)
	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "prefill-0", Labels: map[string]string{"app": "vllm", "role": "prefill"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: portList(ports[:2]), discovery.AnnotationBootstrapPort: "8998,8999",
			"smg.ai/kv-connector": "MooncakeConnector", "smg.ai/kv-engine-id": "p0,p1"}}, "127.0.0.1"))
	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "decode-0", Labels: map[string]string{"app": "vllm", "role": "decode"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(ports[2]), "smg.ai/kv-connector": "MooncakeConnector"}}, "127.0.0.1"))
	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "other-0", Labels: map[string]string{"app": "vllm"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(ports[3])}}, "127.0.0.1"))
	g.waitWorkers(t, "PD workers", urlsOf(ports[:3]...)...)
	w := g.workers()
	for i, want := range []struct{ role, boot, engine string }{{"prefill", "8998", "p0"}, {"prefill", "8999", "p1"}, {"decode", "", ""}} {
		got := w[urlsOf(ports[i])[0]]
		if got.Type() != want.role || got.Label(discovery.LabelBootstrapPort) != want.boot ||
			got.Label(discovery.LabelKVEngineID) != want.engine || got.Label(discovery.LabelKVConnector) != "MooncakeConnector" {
			t.Errorf("worker %s: type %s labels %v, want %+v", got.URL, got.Type(), got.Spec().Labels, want)
		}
	}
}

func TestReplacedPodAtSameAddress(t *testing.T) {
	ns := namespace(t)
	port := engines(t, 1)[0]
	g := startGateway(t, testConfig(ns, "app=sglang"), nil)
	spec := k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(port)}}
	old := must[*corev1.Pod](t)(api.ReadyPod(ctx, spec, "127.0.0.1"))
	g.waitWorkers(t, "registered", urlsOf(port)...)
	// Delete and recreate within one debounce window, so that the gateway may never see the
	// address empty: the new UID alone must trigger the replacement.
	if err := api.DeletePod(ctx, ns, "w-0", 0); err != nil {
		t.Fatal(err)
	}
	renewed := must[*corev1.Pod](t)(api.ReadyPod(ctx, spec, "127.0.0.1"))
	if renewed.UID == old.UID {
		t.Fatal("the recreated pod kept its UID")
	}
	testutil.Eventually(t, "worker re-registered for the new UID", func() bool {
		w := g.workers()[urlsOf(port)[0]]
		return w != nil && w.Label(discovery.LabelPodUID) == string(renewed.UID)
	})
}

func TestStartWithoutCredentials(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	cfg := testConfig("", "app=sglang")
	log, logs := testutil.Logger(slog.LevelInfo)
	cfg.Logger = log
	reg, _ := worker.NewRegistry(worker.DefaultConfig().WithLogger(cfg.Logger))
	defer reg.Close()
	d, err := startDiscovery(cfg, reg)
	if err == nil || d != nil {
		t.Fatal("started without credentials")
	}
	out := logs.String()
	i, j := strings.Index(out, "Failed to start service discovery"), strings.Index(out, "Continuing without service discovery")
	if i < 0 || j < i {
		t.Fatalf("log:\n%s", out)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
