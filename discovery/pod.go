package discovery

import "github.com/smg-go/smg/worker"

// Annotations and labels of the spec (service-discovery.md: Multi-Port Pods, PD Pod
// Annotations, Ownership, Mesh Router Discovery).
const (
	AnnotationWorkerPorts   = "smg.ai/worker-ports"
	AnnotationBootstrapPort = "sglang.ai/bootstrap-port"
	AnnotationMeshPort      = "sglang.ai/mesh-port"

	// AnnotationKVEventsPort and AnnotationKVEventsReplayPort name the ports of an HTTP
	// engine's KV-cache event publisher (ZMQ PUB) and its replay socket (ROUTER) on the pod's
	// IP: one port for every worker port, or one per worker port in smg.ai/worker-ports order.
	AnnotationKVEventsPort       = "smg.ai/kv-events-port"
	AnnotationKVEventsReplayPort = "smg.ai/kv-events-replay-port"

	// DefaultKVConnectorAnnotation is --kv-connector-annotation's default.
	DefaultKVConnectorAnnotation = "smg.ai/kv-connector"
	// DefaultKVEngineIDAnnotation is --kv-engine-id-annotation's default.
	DefaultKVEngineIDAnnotation = "smg.ai/kv-engine-id"

	// LabelPodName, LabelPodUID and LabelDiscovered mark a worker discovery registered.
	LabelPodName      = "smg.ai/pod-name"
	LabelPodUID       = "smg.ai/pod-uid"
	LabelDiscovered   = "smg.ai/discovered"
	LabelPodNamespace = "smg.ai/pod-namespace"
	// LabelBootstrapPort, LabelKVConnector and LabelKVEngineID carry the PD metadata of a
	// discovered worker for the PD router to read.
	LabelBootstrapPort = worker.LabelBootstrapPort
	LabelKVConnector   = worker.LabelKVConnector
	LabelKVEngineID    = worker.LabelKVEngineID
)

// Pod is what discovery reads from a Kubernetes pod: discovery/k8s converts a *corev1.Pod
// into it, so that the mapping rules are plain Go with table tests and no client-go.
type Pod struct {
	Namespace   string
	Name        string
	UID         string
	Labels      map[string]string
	Annotations map[string]string
	// Terminating is true once metadata.deletionTimestamp is set.
	Terminating bool
	// IP is status.podIP; empty until the pod has one.
	IP string
	// Running is status.phase == Running.
	Running bool
	// Ready is the pod's Ready condition being True (it folds in readiness gates).
	Ready bool
}

// Key is namespace/name, the informer's key.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// Serving reports whether the pod may receive traffic: not terminating, an IP, Running and
// Ready (spec: Which Pods Become Workers). The label match is the caller's.
func (p *Pod) Serving() bool {
	return !p.Terminating && p.IP != "" && p.Running && p.Ready
}
