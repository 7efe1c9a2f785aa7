package k8s_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// TestDeployManifestsServerSideDryRun applies every object of deploy/*.yaml with server-side
// apply and dryRun=All: the real API server validates and defaults them (schemas, RBAC
// references, selectors matching templates) without persisting anything.
func TestDeployManifestsServerSideDryRun(t *testing.T) {
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "inference"}}, metav1.CreateOptions{}); err != nil &&
		!strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	resources := map[string]struct {
		client   rest.Interface
		resource string
	}{
		"ServiceAccount":      {api.Client.CoreV1().RESTClient(), "serviceaccounts"},
		"Service":             {api.Client.CoreV1().RESTClient(), "services"},
		"Deployment":          {api.Client.AppsV1().RESTClient(), "deployments"},
		"StatefulSet":         {api.Client.AppsV1().RESTClient(), "statefulsets"},
		"Role":                {api.Client.RbacV1().RESTClient(), "roles"},
		"RoleBinding":         {api.Client.RbacV1().RESTClient(), "rolebindings"},
		"PodDisruptionBudget": {api.Client.PolicyV1().RESTClient(), "poddisruptionbudgets"},
	}
	files, _ := filepath.Glob("../../deploy/*.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d manifest files", len(files))
	}
	kinds := map[string]int{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			body, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var obj struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
			}
			if err := yaml.Unmarshal(body, &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			r, ok := resources[obj.Kind]
			if !ok {
				t.Fatalf("%s: kind %q has no mapping in this test", file, obj.Kind)
			}
			res := r.client.Patch(types.ApplyPatchType).Namespace(obj.Metadata.Namespace).Resource(r.resource).Name(obj.Metadata.Name).
				Param("fieldManager", "smg-deploy-test").Param("dryRun", "All").Body(body).Do(ctx)
			if err := res.Error(); err != nil {
				t.Errorf("%s: %s %s rejected by the API server: %v", filepath.Base(file), obj.Kind, obj.Metadata.Name, err)
				continue
			}
			kinds[obj.Kind]++
		}
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "Deployment", "StatefulSet", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("no %s applied", k)
		}
	}
	// Dry run persisted nothing.
	if _, err := api.Client.AppsV1().StatefulSets("inference").Get(ctx, "smg-mesh", metav1.GetOptions{}); err == nil {
		t.Error("dry run created the StatefulSet")
	}
}
