package helmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/e2e"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/mockworker/mockworkertest"
)

// chartCase is one values set: the objects it must render, the engine pods the gateway it
// configures must discover before it is ready, and what else to check on that gateway.
type chartCase struct {
	name   string
	values string // file in testdata
	kinds  map[string]int
	pods   []map[string]string // labels of the engine pods to create, one mock engine each
	// static mock engines are started outside Kubernetes; staticSets gives their URLs to the
	// run's render in place of the values file's placeholders.
	static     int
	staticSets func(urls []string) []string
	check      func(t *testing.T, g *chartGateway)
}

var cases = []chartCase{
	{
		name: "default", values: "default.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1},
		pods:  []map[string]string{{"app": "sglang-worker"}, {"app": "sglang-worker"}},
	},
	{
		name: "mesh", values: "mesh.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 2, "StatefulSet": 1, "PodDisruptionBudget": 1},
		pods:  []map[string]string{{"app": "sglang-worker"}},
		check: func(t *testing.T, g *chartGateway) {
			// $(POD_NAME) and $(POD_IP) reached the mesh flags, and router discovery runs.
			started := regexp.MustCompile(fmt.Sprintf(`msg="mesh started" name=%s .*advertise=%s:%d `, g.podName, regexp.QuoteMeta(g.ip), g.meshPort))
			if out := g.proc.Output(); !started.MatchString(out) || !strings.Contains(out, "Router node discovery enabled") {
				t.Errorf("the mesh did not start as %s advertising its pod IP, with router discovery:\n%s", g.podName, out)
			}
		},
	},
	{
		name: "pd", values: "pd.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1},
		pods:  []map[string]string{{"app": "engine", "role": "prefill"}, {"app": "engine", "role": "decode"}},
		check: func(t *testing.T, g *chartGateway) {
			r := e2e.MustDo(t, "GET", g.url+"/workers", "", nil)
			for _, role := range []string{`"prefill"`, `"decode"`} {
				if !strings.Contains(r.Body, role) {
					t.Errorf("GET /workers has no %s worker: %s", role, r.Body)
				}
			}
		},
	},
	{
		name: "static", values: "static.yaml",
		kinds:  map[string]int{"ServiceAccount": 1, "Service": 1, "Deployment": 1},
		static: 2,
		staticSets: func(urls []string) []string {
			return []string{"gateway.workerUrls=" + jsonOf(urls)}
		},
	},
	{
		name: "pd-static", values: "pd-static.yaml",
		kinds:  map[string]int{"ServiceAccount": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1},
		static: 3,
		staticSets: func(urls []string) []string {
			return []string{
				`pd.prefill=[{"url":` + jsonOf(urls[0]) + `,"bootstrapPort":8998},{"url":` + jsonOf(urls[1]) + `,"bootstrapPort":"none"}]`,
				"pd.decode=" + jsonOf(urls[2:]),
			}
		},
	},
	{
		name: "epd", values: "epd.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1},
		pods:  []map[string]string{{"app": "engine", "role": "encode"}, {"app": "engine", "role": "prefill"}, {"app": "engine", "role": "decode"}},
		check: func(t *testing.T, g *chartGateway) {
			// Readiness 200 (above) needs a healthy worker of every role in EPD mode.
			r := e2e.MustDo(t, "GET", g.url+"/readiness", "", nil)
			if !strings.Contains(r.Body, `"healthy_encode_workers":1`) {
				t.Errorf("GET /readiness is not EPD's: %s", r.Body)
			}
		},
	},
	{
		name: "epd-static", values: "epd-static.yaml",
		kinds:  map[string]int{"ServiceAccount": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1},
		static: 4,
		staticSets: func(urls []string) []string {
			return []string{
				`pd.epd.encode=[{"url":` + jsonOf(urls[0]) + `,"bootstrapPort":9000},{"url":` + jsonOf(urls[1]) + `,"bootstrapPort":"none"}]`,
				`pd.prefill=[{"url":` + jsonOf(urls[2]) + `,"bootstrapPort":8998}]`,
				"pd.decode=" + jsonOf(urls[3:]),
			}
		},
		check: func(t *testing.T, g *chartGateway) {
			r := e2e.MustDo(t, "GET", g.url+"/workers", "", nil)
			if !strings.Contains(r.Body, `"encode_count":2`) {
				t.Errorf("GET /workers has not the two static encode workers: %s", r.Body)
			}
		},
	},
	{
		name: "full", values: "full.yaml",
		kinds: map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Service": 1, "Deployment": 1,
			"PodDisruptionBudget": 1, "ServiceMonitor": 1, "Secret": 2},
		pods: []map[string]string{{"app": "full-engine", "tier": "gpu", "model": "llama-test"}},
		check: func(t *testing.T, g *chartGateway) {
			// The key of apiKey.value reached the gateway through the Secret and --api-key-file.
			if r := e2e.MustDo(t, "GET", g.url+"/workers", "", nil); r.Status != 401 {
				t.Errorf("GET /workers without the key: %d, want 401", r.Status)
			}
			r := e2e.MustDo(t, "GET", g.url+"/workers", "", map[string]string{"Authorization": "Bearer full-test-key"})
			if r.Status != 200 || !strings.Contains(r.Body, "llama-test") {
				t.Errorf("GET /workers with the key: %d %s, want 200 with the model id from the pod label", r.Status, r.Body)
			}
		},
	},
}

// TestChartLints runs `helm lint --strict` with every values set of the tests. helm lint
// reports a template's `fail` only as a log line, so that counts as a failure too.
func TestChartLints(t *testing.T) {
	for _, c := range cases {
		out, stderr, err := helm("lint", "--strict", chartDir(), "--values", filepath.Join("testdata", c.values))
		if err != nil {
			t.Errorf("%s: %v", c.values, err)
		} else if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") || strings.Contains(stderr, "fail") {
			t.Errorf("%s: helm lint says:\n%s%s", c.values, out, stderr)
		}
	}
}

// TestChartRefusesBadValues: a misspelt or out-of-range value fails the render (the values
// schema), as do combinations that cannot work (the chart's own checks), each with a message
// that says what to change.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{`gateway.polcy="random"`}, "additional properties 'polcy' not allowed"},
		{[]string{`gateway.logLevel="verbose"`}, "value must be one of"},
		{[]string{`retries.maxRetries="three"`}, "/retries/maxRetries"},
		{[]string{`mesh.enabled=true`, `discovery.enabled=false`}, "mesh.enabled needs discovery.enabled"},
		{[]string{`mesh.enabled=true`, `discovery.namespace="elsewhere"`}, "router discovery watches discovery.namespace"},
		{[]string{`apiKey.value="k"`, `apiKey.existingSecret="s"`}, "set existingSecret or value, not both"},
		{[]string{`workerCA.pem="k"`, `workerCA.existingSecret="s"`}, "set existingSecret or pem, not both"},
		{[]string{`pd.epd.enabled=true`}, "pd.epd.enabled needs pd.enabled"},
		{[]string{`pd.enabled=true`, `pd.epd.enabled=true`, `pd.prefillSelector={"role":"p"}`, `pd.decodeSelector={"role":"d"}`}, "needs all three role selectors"},
		{[]string{`pd.epd.encodePolicy="cache_aware"`}, "value must be one of"},
	} {
		args := []string{"template", "smg", chartDir()}
		for _, s := range tc.sets {
			args = append(args, "--set-json", s)
		}
		_, _, err := helm(args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one saying %q", tc.sets, err, tc.want)
		}
	}
}

// TestChartServerSideDryRun renders each values set and applies every object to the real API
// server with dryRun=All and strict field validation: schemas, defaults, selectors matching
// pod templates, RBAC references, the ServiceMonitor against its CRD. Nothing is persisted.
func TestChartServerSideDryRun(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := namespace(t)
			objs := render(t, "smg", ns, []string{c.values})
			if got := kindCounts(objs); !equalCounts(got, c.kinds) {
				t.Fatalf("rendered %v, want %v", got, c.kinds)
			}
			for _, o := range objs {
				if err := apply(o, true); err != nil {
					t.Errorf("%s %s rejected by the API server: %v", o.GetKind(), o.GetName(), err)
				}
			}
			for _, o := range objs {
				if o.GetKind() == "Deployment" || o.GetKind() == "StatefulSet" {
					_, err := api.Client.AppsV1().Deployments(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
					_, err2 := api.Client.AppsV1().StatefulSets(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
					if !apierrors.IsNotFound(err) || !apierrors.IsNotFound(err2) {
						t.Errorf("the dry run persisted %s %s", o.GetKind(), o.GetName())
					}
				}
			}
		})
	}
}

// TestChartGatewayRuns runs the real smg with each values set's rendered container: its
// arguments, its environment (the downward API filled in as a kubelet would), its Secret
// volumes, and a token of the chart's ServiceAccount bound by the chart's RBAC. Each gateway
// must discover its engine pods and answer /readiness 200: the flags exist, their values are
// valid together, and the RBAC is enough for discovery.
func TestChartGatewayRuns(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := namespace(t)
			enginePods(t, ns, c.pods)
			var sets []string
			if c.static > 0 {
				sets = c.staticSets(mockEngines(t, c.static).URLs())
			}
			g, err := launch(t, ns, firstPod, c.values, sets...)
			if err != nil {
				t.Fatal(err)
			}
			workers := len(c.pods) + c.static
			testutil.Eventually(t, fmt.Sprintf("/readiness 200 with %d workers", workers), func() bool {
				r, err := e2e.Do("GET", g.url+"/readiness", "", nil)
				return err == nil && r.Status == 200 && strings.Contains(r.Body, fmt.Sprintf(`"healthy_workers":%d`, workers))
			})
			if r := e2e.MustDo(t, "GET", g.url+"/liveness", "", nil); r.Status != 200 {
				t.Errorf("/liveness: %d", r.Status)
			}
			if c.check != nil {
				c.check(t, g)
			}
		})
	}
}

// TestChartFlagsExistInTheBinary reads every flag name the chart's argument table can pass
// (templates/_helpers.tpl: `(list "name" value)` rows and literal `- --name` items) and finds
// each in `smg launch --help`: a flag that no values set of these tests turns on (the mesh TLS
// files, say) is checked too, by name.
func TestChartFlagsExistInTheBinary(t *testing.T) {
	tpl, err := os.ReadFile(filepath.Join(chartDir(), "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`\(list "([a-z0-9-]+)"|(?m)^- --([a-z0-9-]+)$`).FindAllStringSubmatch(string(tpl), -1) {
		names = append(names, m[1]+m[2])
	}
	if len(names) < 60 { // the table has one row per flag: fewer means the pattern missed its shape
		t.Fatalf("found %d flags in _helpers.tpl: %v", len(names), names)
	}
	help, err := exec.Command(e2e.Build(t).SMG, "launch", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("the chart passes --%s, which smg launch --help does not list", n)
		}
	}
}

// TestChartWithAMisspeltFlagFails proves the run above can fail: a chart that passes a flag
// the binary does not know renders, lints and passes the API server's dry run, and only the
// binary refuses it.
func TestChartWithAMisspeltFlagFails(t *testing.T) {
	ns := namespace(t)
	bad := `extraArgs=["--polcy=random"]`
	for _, o := range render(t, "smg", ns, []string{"default.yaml"}, bad) {
		if err := apply(o, true); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	_, err := launch(t, ns, firstPod, "default.yaml", bad)
	if err == nil || !strings.Contains(err.Error(), "--polcy") {
		t.Fatalf("the gateway started with --polcy (err %v), want it refused", err)
	}
}

// TestChartMeshGatewaysJoin runs two gateways of the mesh values set as pods smg-0 and smg-1
// (pod IPs 127.0.0.1 and 127.0.0.2) and gives the API server their pods with the rendered
// template's labels and annotations: each must find the other through --router-selector and
// the sglang.ai/mesh-port annotation, and list it ALIVE in /mesh/status.
func TestChartMeshGatewaysJoin(t *testing.T) {
	ns := namespace(t)
	enginePods(t, ns, []map[string]string{{"app": "sglang-worker"}})
	var gws []*chartGateway
	for i, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		g, err := launch(t, ns, podIdentity{i, ip}, "mesh.yaml")
		if err != nil {
			t.Fatal(err)
		}
		gws = append(gws, g)
		spec := k8stest.PodSpec{Namespace: ns, Name: g.podName, Labels: g.podLabels, Annotations: g.podAnnotations}
		if _, err := api.ReadyPod(ctx, spec, ip); err != nil {
			t.Fatal(err)
		}
	}
	for i, g := range gws {
		other := gws[1-i].podName
		testutil.Eventually(t, g.podName+" lists "+other+" ALIVE in /mesh/status", func() bool {
			r, err := e2e.Do("GET", g.url+"/mesh/status", "", nil)
			return err == nil && r.Status == 200 && e2e.MeshMemberAlive(r.Body, other)
		})
	}
}

// chartGateway is a running smg configured by the chart.
type chartGateway struct {
	proc *e2e.Process
	url  string
	// podName, podLabels and podAnnotations are those of the pod it plays: the workload's
	// name with the ordinal, the pod template's metadata.
	podName                   string
	podLabels, podAnnotations map[string]string
	ip                        string
	meshPort                  int
}

// podIdentity is the pod a launched gateway plays: its ordinal in the workload (the name a
// StatefulSet gives it) and its pod IP, a loopback address.
type podIdentity struct {
	ordinal int
	ip      string
}

var firstPod = podIdentity{0, "127.0.0.1"}

// launch renders the chart for loopback (every host the pod IP, free ports; nothing else
// differs from the values file), creates the ServiceAccount, RBAC and Secret objects for real,
// and starts smg as the pod would run it. It returns once /liveness answers, or an error with
// the gateway's output when it exits first.
func launch(t *testing.T, ns string, pod podIdentity, values string, sets ...string) (*chartGateway, error) {
	t.Helper()
	httpPort, metricsPort := e2e.FreePort(t, pod.ip), e2e.FreePort(t, pod.ip)
	g := &chartGateway{ip: pod.ip, meshPort: e2e.FreePort(t, pod.ip), url: "http://" + pod.ip + ":" + strconv.Itoa(httpPort)}
	host := strconv.Quote(pod.ip)
	loopback := []string{"gateway.host=" + host, "gateway.metricsHost=" + host, "mesh.host=" + host,
		"gateway.port=" + strconv.Itoa(httpPort), "gateway.metricsPort=" + strconv.Itoa(metricsPort), "mesh.port=" + strconv.Itoa(g.meshPort)}
	objs := render(t, "smg", ns, []string{values}, append(loopback, sets...)...)

	secrets := map[string]map[string]string{}
	var spec *corev1.PodSpec
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Secret":
			if err := apply(o, false); err != nil {
				t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			if o.GetKind() == "Secret" {
				data, _, _ := unstructured.NestedStringMap(o.Object, "stringData")
				secrets[o.GetName()] = data
			}
		case "Deployment", "StatefulSet":
			raw, ok, err := unstructured.NestedMap(o.Object, "spec", "template")
			if !ok || err != nil {
				t.Fatalf("%s %s has no pod template: %v", o.GetKind(), o.GetName(), err)
			}
			var tmpl corev1.PodTemplateSpec
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
				t.Fatal(err)
			}
			spec, g.podLabels, g.podAnnotations = &tmpl.Spec, tmpl.Labels, tmpl.Annotations
			g.podName = o.GetName() + "-" + strconv.Itoa(pod.ordinal) // a StatefulSet's naming; any name for a Deployment
		}
	}
	if spec == nil || len(spec.Containers) != 1 {
		t.Fatalf("rendered no workload with one container")
	}
	c := spec.Containers[0]

	// The pod's ServiceAccount, with what the chart's RBAC grants it and nothing more.
	tok, err := api.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, spec.ServiceAccountName, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of the pod's ServiceAccount %q: %v", spec.ServiceAccountName, err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kubeconfig, tok.Status.Token)

	// Secret volumes become files under dir, and the arguments that name them follow.
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			data, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s mounts Secret %s, which the chart did not render", v.Name, v.Secret.SecretName)
			}
			local := filepath.Join(dir, "mounts", vm.MountPath)
			writeSecretVolume(t, local, data, v.Secret.Items)
			mounts[vm.MountPath] = local
		}
	}

	env := []string{"KUBECONFIG=" + kubeconfig}
	vars := map[string]string{}
	for _, e := range c.Env {
		val := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil {
			switch f.FieldRef.FieldPath {
			case "metadata.name":
				val = g.podName
			case "status.podIP":
				val = pod.ip
			default:
				t.Fatalf("env %s: the test does not fill field %s", e.Name, f.FieldRef.FieldPath)
			}
		} else if f != nil {
			t.Fatalf("env %s: the test fills only values and field references", e.Name)
		}
		vars[e.Name] = val
		env = append(env, e.Name+"="+val)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		a = expandVars(a, vars)
		for mountPath, local := range mounts {
			a = strings.ReplaceAll(a, mountPath, local)
		}
		args[i] = a
	}
	if len(c.Command) != 0 {
		t.Fatalf("the container sets command %v: the test runs the image's entrypoint (smg) with args only", c.Command)
	}

	g.proc = e2e.StartEnv(t, env, e2e.Build(t).SMG, args...)
	for deadline := time.Now().Add(testutil.Patience); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code := g.proc.Wait(0); code != -1 {
			return nil, fmt.Errorf("smg %s exited with %d:\n%s", strings.Join(args, " "), code, g.proc.Output())
		}
		if r, err := e2e.Do("GET", g.url+"/liveness", "", nil); err == nil && r.Status == 200 {
			return g, nil
		}
	}
	return nil, fmt.Errorf("smg did not answer /liveness within %v:\n%s", testutil.Patience, g.proc.Output())
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandVars replaces $(NAME) with the container's variable NAME, as the kubelet does in args;
// a reference to an undefined variable stays as written, as there.
func expandVars(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

func writeSecretVolume(t *testing.T, dir string, data map[string]string, items []corev1.KeyToPath) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = v
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			t.Fatalf("Secret volume item %q: no such key in the Secret", it.Key)
		}
		files[it.Path] = v
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func writeKubeconfig(t *testing.T, path, token string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: api.Config.Host,
		CertificateAuthority: api.Config.CAFile, CertificateAuthorityData: api.Config.CAData}
	cfg.AuthInfos["gateway"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["gateway"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "gateway"}
	cfg.CurrentContext = "gateway"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// enginePods starts one mock engine per label set and a Ready pod for each at 127.0.0.1,
// pointing at it through smg.ai/worker-ports.
func enginePods(t *testing.T, ns string, labels []map[string]string) {
	t.Helper()
	if len(labels) == 0 {
		return
	}
	for i, a := range mockEngines(t, len(labels)).Addrs() {
		_, p, _ := strings.Cut(a, ":")
		spec := k8stest.PodSpec{Namespace: ns, Name: "engine-" + strconv.Itoa(i), Labels: labels[i],
			Annotations: map[string]string{"smg.ai/worker-ports": p}}
		if _, err := api.ReadyPod(ctx, spec, "127.0.0.1"); err != nil {
			t.Fatal(err)
		}
	}
}

// mockEngines starts n mock engines on 127.0.0.1 for the test.
func mockEngines(t *testing.T, n int) *mockworker.Fleet {
	t.Helper()
	mc := mockworker.DefaultConfig() // on 127.0.0.1
	mc.Count, mc.EventLoops = n, 1
	return mockworkertest.Start(t, mc)
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func namespace(t *testing.T) string {
	t.Helper()
	ns, err := api.Namespace(ctx, "helm-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func kindCounts(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetKind()]++
	}
	return out
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestRawManifestsAreTheChartsOutput: deploy/gateway-deployment.yaml and
// deploy/mesh-statefulset.yaml are what hack/helm/manifests.sh renders from the chart now, so
// `kubectl apply -f deploy/` and `helm install` deploy the same objects.
func TestRawManifestsAreTheChartsOutput(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "hack", "helm", "manifests.sh"), dir)
	cmd.Env = append(os.Environ(), "HELM="+helmBin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/helm/manifests.sh: %v\n%s", err, out)
	}
	for _, name := range []string{"gateway-deployment.yaml", "mesh-statefulset.yaml"} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("deploy/%s is not the chart's output: run hack/helm/manifests.sh", name)
		}
	}
}
