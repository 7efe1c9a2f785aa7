package discovery

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/smg-go/smg/worker"
)

// ModelIDSource says where a discovered worker's model id comes from (--model-id-from).
type ModelIDSource struct {
	// Kind is "" (ask the worker), "namespace", "label" or "annotation".
	Kind string
	// Key is the label or annotation key.
	Key string
}

// ParseModelIDSource parses --model-id-from: namespace, label:<key> or annotation:<key>.
func ParseModelIDSource(v string) (ModelIDSource, error) {
	if v == "" {
		return ModelIDSource{}, nil
	}
	if v == "namespace" {
		return ModelIDSource{Kind: "namespace"}, nil
	}
	kind, key, ok := strings.Cut(v, ":")
	if ok && (kind == "label" || kind == "annotation") && strings.TrimSpace(key) != "" {
		return ModelIDSource{Kind: kind, Key: strings.TrimSpace(key)}, nil
	}
	return ModelIDSource{}, fmt.Errorf("invalid --model-id-from %q: give namespace, label:<key> or annotation:<key>", v)
}

// of returns the model id the pod's metadata names, or "".
func (m ModelIDSource) of(pod *Pod) string {
	switch m.Kind {
	case "namespace":
		return pod.Namespace
	case "label":
		return pod.Labels[m.Key]
	case "annotation":
		return pod.Annotations[m.Key]
	}
	return ""
}

// Mapping turns pods into the workers they should contribute. It holds no state: the same
// pods always give the same workers.
type Mapping struct {
	// Selector selects regular worker pods. Ignored in PD mode.
	Selector Selector
	// Prefill, Decode and Encode are the role selectors; PD mode is on when any is set.
	Prefill, Decode, Encode Selector
	// Port is the worker port of pods without smg.ai/worker-ports.
	Port int
	// ModelID optionally fills the model id from pod metadata.
	ModelID ModelIDSource
	// KVConnectorAnnotation and KVEngineIDAnnotation name the vLLM KV annotations.
	KVConnectorAnnotation, KVEngineIDAnnotation string
}

// PDMode reports whether role selectors are in use.
func (m *Mapping) PDMode() bool {
	return m.Prefill != nil || m.Decode != nil || m.Encode != nil
}

// role returns the worker type of a pod, or "" when no selector matches: encode, then
// prefill, then decode in PD mode (spec: PD Disaggregation Discovery).
func (m *Mapping) role(labels map[string]string) string {
	if !m.PDMode() {
		if m.Selector.Matches(labels) {
			return worker.TypeRegular
		}
		return ""
	}
	switch {
	case m.Encode != nil && m.Encode.Matches(labels):
		return worker.TypeEncode
	case m.Prefill != nil && m.Prefill.Matches(labels):
		return worker.TypePrefill
	case m.Decode != nil && m.Decode.Matches(labels):
		return worker.TypeDecode
	}
	return ""
}

// Desired is one worker a pod should contribute.
type Desired struct {
	// URL is http://<pod-ip>:<port>, IPv6 in brackets: the registry's key.
	URL          string
	PodNamespace string
	PodName      string
	PodUID       string
	// Role is the worker type: regular, prefill, decode or encode.
	Role    string
	ModelID string
	// BootstrapPort is the PD bootstrap port, 0 when none (prefill and encode only).
	BootstrapPort int
	KVConnector   string
	KVEngineID    string
	// KVEventsEndpoint and KVEventsReplayEndpoint are the engine's KV-cache event sockets,
	// tcp://<pod-ip>:<port>, from smg.ai/kv-events-port and smg.ai/kv-events-replay-port;
	// empty when the pod names none. Registration drops them for a gRPC engine, which
	// publishes on SubscribeKvEvents.
	KVEventsEndpoint, KVEventsReplayEndpoint string
}

// Spec is the worker.Spec that registers d, with the ownership labels of the spec.
func (d *Desired) Spec() worker.Spec {
	labels := map[string]string{
		LabelPodName:      d.PodName,
		LabelPodUID:       d.PodUID,
		LabelPodNamespace: d.PodNamespace,
		LabelDiscovered:   "true",
	}
	if d.BootstrapPort != 0 {
		labels[LabelBootstrapPort] = strconv.Itoa(d.BootstrapPort)
	}
	if d.KVConnector != "" {
		labels[LabelKVConnector] = d.KVConnector
	}
	if d.KVEngineID != "" {
		labels[LabelKVEngineID] = d.KVEngineID
	}
	return worker.Spec{URL: d.URL, ModelID: d.ModelID, WorkerType: d.Role, Labels: labels,
		KVEventsEndpoint: d.KVEventsEndpoint, KVEventsReplayEndpoint: d.KVEventsReplayEndpoint}
}

// Warning is a problem with one pod's annotations, logged once per pod UID.
type Warning struct {
	PodUID  string
	Message string
}

// Desired returns the workers the pods should contribute, sorted by URL, and the
// annotation warnings met on the way. A pod contributes when a selector matches it and it is
// Serving; when two pods claim one address (a stale pod object beside its replacement) the
// Serving one was already the only candidate, and among several the first by name wins.
func (m *Mapping) Desired(pods []Pod) ([]Desired, []Warning) {
	var warns []Warning
	warn := func(p *Pod, msg string) {
		if msg != "" {
			warns = append(warns, Warning{PodUID: p.UID, Message: msg})
		}
	}
	claimed := make(map[string]bool, len(pods))
	type keyed struct {
		key string
		pod *Pod
	}
	sorted := make([]keyed, len(pods))
	for i := range pods {
		sorted[i] = keyed{pods[i].Key(), &pods[i]}
	}
	slices.SortFunc(sorted, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	out := make([]Desired, 0, len(pods))
	for _, k := range sorted {
		p := k.pod
		role := m.role(p.Labels)
		if role == "" || !p.Serving() {
			continue
		}
		ports, w := workerPorts(p, m.Port)
		warn(p, w)
		var boot []int
		if role == worker.TypePrefill || role == worker.TypeEncode {
			boot, w = bootstrapPorts(p, len(ports))
			warn(p, w)
		}
		connector, w := kvConnector(p, m.KVConnectorAnnotation)
		warn(p, w)
		engineIDs, w := kvEngineIDs(p, m.KVEngineIDAnnotation, len(ports))
		warn(p, w)
		eventPorts, replayPorts, ws := kvEventsPorts(p, len(ports))
		for _, w := range ws {
			warn(p, w)
		}
		model := m.ModelID.of(p)
		for i, port := range ports {
			url := "http://" + net.JoinHostPort(p.IP, strconv.Itoa(port))
			if claimed[url] {
				continue
			}
			claimed[url] = true
			d := Desired{URL: url, PodNamespace: p.Namespace, PodName: p.Name, PodUID: p.UID,
				Role: role, ModelID: model, KVConnector: connector}
			if boot != nil {
				d.BootstrapPort = boot[i]
			}
			if engineIDs != nil {
				d.KVEngineID = engineIDs[i]
			}
			if eventPorts != nil {
				d.KVEventsEndpoint = "tcp://" + net.JoinHostPort(p.IP, strconv.Itoa(eventPorts[i]))
			}
			if replayPorts != nil {
				d.KVEventsReplayEndpoint = "tcp://" + net.JoinHostPort(p.IP, strconv.Itoa(replayPorts[i]))
			}
			out = append(out, d)
		}
	}
	return sortedByURL(out), warns
}

// sortedByURL returns ds sorted by URL, moving each Desired (a large struct) once.
func sortedByURL(ds []Desired) []Desired {
	if len(ds) == 0 {
		return nil
	}
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ds[a].URL, ds[b].URL) })
	out := make([]Desired, len(ds))
	for i, j := range order {
		out[i] = ds[j]
	}
	return out
}
