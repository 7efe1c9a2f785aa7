package helmchart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
)

var (
	// api is the real kube-apiserver every test shares; each chart case works in a fresh
	// namespace.
	api *k8stest.Server
	// helmBin is helm built by hack/helm/build.sh.
	helmBin string
	dyn     *dynamic.DynamicClient
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	ctx     = context.Background()
)

func TestMain(m *testing.M) {
	code, err := setUp(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "internal/helmchart:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setUp(m *testing.M) (int, error) {
	var err error
	if helmBin, err = buildHelm(); err != nil {
		return 0, err
	}
	if api, err = k8stest.Start(func(s string) { fmt.Fprintln(os.Stderr, s) }); err != nil {
		return 0, fmt.Errorf("the chart tests need a kube-apiserver: %w", err)
	}
	defer api.Stop()
	if dyn, err = dynamic.NewForConfig(api.Config); err != nil {
		return 0, err
	}
	mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(api.Client.Discovery()))
	if err := installServiceMonitorCRD(); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func chartDir() string { return filepath.Join(repoRoot(), "deploy", "helm", "smg") }

// buildHelm runs hack/helm/build.sh (idempotent, serialised by a lock: the first run on a
// machine builds helm from its module, ~4 minutes; later runs find it cached) and returns the
// binary's path, the script's last line.
func buildHelm() (string, error) {
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "hack", "helm", "build.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cannot build helm (hack/helm/build.sh): %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// helm runs the helm binary and returns its standard output and standard error; the error
// carries both.
func helm(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(helmBin, args...)
	// A private helm home: nothing of the user's helm configuration or caches is read or written.
	home, err := os.MkdirTemp("", "smg-helm-home-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	if err != nil {
		return string(out), errBuf.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, errBuf.String())
	}
	return string(out), errBuf.String(), nil
}

// render runs `helm template` for release in namespace ns with the values files and --set
// arguments given, and decodes every rendered object.
func render(t testing.TB, release, ns string, values []string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartDir(), "--namespace", ns}
	for _, v := range values {
		args = append(args, "--values", filepath.Join("testdata", v))
	}
	for _, s := range sets {
		args = append(args, "--set-json", s)
	}
	out, _, err := helm(args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("helm template output: %v\n%s", err, out)
	}
	return objs
}

// decodeAll decodes a multi-document YAML stream into objects, skipping empty documents.
func decodeAll(stream string) ([]*unstructured.Unstructured, error) {
	dec := k8syaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// apply applies obj with server-side apply and strict field validation (a field the API does
// not know is an error, not silently dropped); dryRun asks the API server to validate, default
// and admit it without persisting anything.
func apply(obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "smg-helm-test", Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	return err
}

// installServiceMonitorCRD creates the ServiceMonitor CRD of testdata and waits until the API
// server serves the kind.
func installServiceMonitorCRD() error {
	raw, err := os.ReadFile(filepath.Join("testdata", "servicemonitor-crd.yaml"))
	if err != nil {
		return err
	}
	objs, err := decodeAll(string(raw))
	if err != nil || len(objs) != 1 {
		return fmt.Errorf("testdata/servicemonitor-crd.yaml: %d objects, %v", len(objs), err)
	}
	if err := apply(objs[0], false); err != nil {
		return fmt.Errorf("install the ServiceMonitor CRD: %w", err)
	}
	gk := schema.GroupKind{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}
	for deadline := time.Now().Add(testutil.Patience); ; time.Sleep(100 * time.Millisecond) {
		mapper.Reset()
		if _, err := mapper.RESTMapping(gk, "v1"); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the API server does not serve ServiceMonitor after installing its CRD: %w", err)
		}
	}
}
