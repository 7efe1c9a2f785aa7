// Package k8stest runs a real kube-apiserver with etcd on loopback for tests, with the
// scripts in hack/k8s (built once and cached outside the repository, ~10 minutes the first
// time on a machine), and offers the helpers tests need without a kubelet: pods whose status
// the test writes through the status subresource, fresh namespaces, and a TCP proxy the test
// can cut to simulate a lost watch.
package k8stest
