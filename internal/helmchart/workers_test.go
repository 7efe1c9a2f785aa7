package helmchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestWorkerManifests checks deploy/'s engine examples: each container runs
// its engine's own launch command bound to 0.0.0.0 on one port of the pod's
// smg.ai/worker-ports, requests one GPU and is probed for readiness on its port; and the
// real kube-apiserver accepts the StatefulSets in a strict server-side dry run.
func TestWorkerManifests(t *testing.T) {
	for _, c := range []struct {
		engine, file, launch string
	}{
		{"sglang", "workers-statefulset.yaml", "python3 -m sglang.launch_server --model-path "},
		{"vllm", "workers-vllm-statefulset.yaml", "vllm serve "},
	} {
		t.Run(c.engine, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", c.file))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll(string(b))
			if err != nil || len(objs) != 1 || objs[0].GetKind() != "StatefulSet" {
				t.Fatalf("want one StatefulSet in %s, got %d objects (%v)", c.file, len(objs), err)
			}
			var sts appsv1.StatefulSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &sts); err != nil {
				t.Fatal(err)
			}
			ports := strings.Split(sts.Spec.Template.Annotations["smg.ai/worker-ports"], ",")
			if len(ports) != len(sts.Spec.Template.Spec.Containers) {
				t.Fatalf("smg.ai/worker-ports %v, but %d engine containers", ports, len(sts.Spec.Template.Spec.Containers))
			}
			for i, ctr := range sts.Spec.Template.Spec.Containers {
				cmd := strings.Join(ctr.Command, " ")
				if !strings.HasPrefix(cmd, c.launch) || !strings.Contains(cmd, "--host 0.0.0.0") || !strings.HasSuffix(cmd, "--port "+ports[i]) {
					t.Errorf("container %s runs %q: want %q…, --host 0.0.0.0 and --port %s", ctr.Name, cmd, c.launch, ports[i])
				}
				if q := ctr.Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
					t.Errorf("container %s requests %v nvidia.com/gpu, want 1", ctr.Name, q.String())
				}
				p := ctr.ReadinessProbe
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.String() != ports[i] {
					t.Errorf("container %s: readiness probe %+v, want GET /health on port %s", ctr.Name, p, ports[i])
				}
				if len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != int32(8000+i) || ports[i] != strings.TrimSpace(ports[i]) {
					t.Errorf("container %s exposes %+v, want port %s", ctr.Name, ctr.Ports, ports[i])
				}
			}
			objs[0].SetNamespace(namespace(t))
			if err := apply(objs[0], true); err != nil {
				t.Errorf("%s rejected by the API server: %v", c.file, err)
			}
		})
	}
}
