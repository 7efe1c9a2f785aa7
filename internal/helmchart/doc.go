// Package helmchart holds the tests of the Helm chart in deploy/helm/smg; it has no code of
// its own. The tests build helm from its Go module (hack/helm/build.sh, cached outside the
// repository, not in go.mod), lint the chart, render it with `helm template` for several
// values sets, apply every rendered object to a real kube-apiserver with server-side dry run
// (hack/k8s, discovery/k8s/k8stest), and run the real smg binary with the rendered container
// arguments, environment and ServiceAccount token: the gateway must start, discover engine
// pods with the RBAC the chart grants, and answer /readiness. A chart that passes a flag the
// binary does not know fails that run. They also check that the raw manifests in deploy/ are
// the chart's output (hack/helm/manifests.sh).
package helmchart
