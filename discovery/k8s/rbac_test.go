package k8s_test

import (
	"strconv"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
)

// TestLeastPrivilegeServiceAccount runs discovery with a ServiceAccount token that has only
// the spec's Role (get, list, watch on pods in one namespace): that is enough. Without the
// RoleBinding the watcher reports the spec's error and retries.
func TestLeastPrivilegeServiceAccount(t *testing.T) {
	ns := namespace(t)
	port := engines(t, 1)[0]
	core, rbac := api.Client.CoreV1(), api.Client.RbacV1()
	must[*corev1.ServiceAccount](t)(core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "smg"}}, metav1.CreateOptions{}))
	must[*rbacv1.Role](t)(rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "smg-discovery"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{}))
	tok := must[*authv1.TokenRequest](t)(core.ServiceAccounts(ns).CreateToken(ctx, "smg", &authv1.TokenRequest{}, metav1.CreateOptions{}))
	rc := rest.AnonymousClientConfig(api.Config)
	rc.BearerToken = tok.Status.Token

	must[*corev1.Pod](t)(api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-0", Labels: map[string]string{"app": "sglang"},
		Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(port)}}, "127.0.0.1"))
	g := startGateway(t, testConfig(ns, "app=sglang"), rc)
	testutil.Eventually(t, "RBAC denial reported", func() bool {
		return strings.Contains(g.logs.String(), "K8s worker watcher error (auto-retrying with backoff)")
	})
	if len(g.workers()) != 0 {
		t.Fatal("registered workers without permission to list pods")
	}
	must[*rbacv1.RoleBinding](t)(rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "smg-discovery"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "smg", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "smg-discovery", APIGroup: "rbac.authorization.k8s.io"}}, metav1.CreateOptions{}))
	g.waitWorkers(t, "registered once the Role is bound", urlsOf(port)...)
}
