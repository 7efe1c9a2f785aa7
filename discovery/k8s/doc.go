// Package k8s runs service discovery against the Kubernetes API with client-go: one shared
// informer on Pods with the label selector sent to the API server (it lists, watches,
// reconnects with backoff and relists on 410 Gone as client-go does), feeding the
// level-triggered discovery.Reconciler; and, with --router-selector, --enable-mesh and
// --service-discovery, a second informer on router pods that reports mesh membership
// changes. All client-go imports of the module live under this directory.
//
// # Concurrency model
//
// Start launches the informer goroutines and the reconcile loop and returns at once; it does
// not wait for the first list, so an unreachable API server never delays the gateway. Informer
// handlers only wake the reconciler (Trigger); every pass reads the informer's store. Stop
// cancels everything and waits for it.
//
// # Ownership of buffers
//
// Pods read from the informer's store are client-go's shared cache objects: they are
// converted into discovery.Pod values that share their label and annotation maps, and neither
// side modifies them.
package k8s
