// Package discovery will hold Kubernetes pod discovery: the pure pod-to-worker mapping,
// the reconcile diff and the job queue; client-go code lives under discovery/k8s.
//
// It is a stub until the discovery issue lands.
package discovery
