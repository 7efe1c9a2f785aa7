package discovery

import (
	"fmt"
	"strconv"
	"strings"
)

// parsePort parses one port from 1 to 65535, allowing surrounding spaces.
func parsePort(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '+' {
		return 0, false
	}
	return n, true
}

// parsePortList parses a comma-separated list of ports, keeping their order. dedup drops
// repeated ports (smg.ai/worker-ports); without it a repeat is kept (bootstrap ports may
// repeat across worker ports).
func parsePortList(v string, dedup bool) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, entry := range strings.Split(v, ",") {
		p, ok := parsePort(entry)
		if !ok {
			return nil, fmt.Errorf("%q is not a port from 1 to 65535", strings.TrimSpace(entry))
		}
		if dedup && seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}

// workerPorts returns the ports of a pod's workers: smg.ai/worker-ports when present and
// valid, else the default port. warn is non-empty when the annotation was invalid.
func workerPorts(pod *Pod, defaultPort int) (ports []int, warn string) {
	v, ok := pod.Annotations[AnnotationWorkerPorts]
	if !ok {
		return []int{defaultPort}, ""
	}
	ports, err := parsePortList(v, true)
	if err != nil {
		return []int{defaultPort}, fmt.Sprintf("invalid %s annotation on pod %s: %v; using port %d",
			AnnotationWorkerPorts, pod.Key(), err, defaultPort)
	}
	return ports, ""
}

// bootstrapPorts returns one bootstrap port per worker port, or nil (spec: PD Pod
// Annotations).
func bootstrapPorts(pod *Pod, nPorts int) (ports []int, warn string) {
	return perWorkerPorts(pod, AnnotationBootstrapPort, nPorts)
}

// kvEventsPorts returns one KV-event publisher port per worker port from the
// smg.ai/kv-events-port annotation, and one replay port per worker port from
// smg.ai/kv-events-replay-port (nil when absent or invalid, with a warning). A replay port
// without a publisher port is ignored with a warning: replay completes a subscription.
func kvEventsPorts(pod *Pod, nPorts int) (pub, replay []int, warns []string) {
	pub, w := perWorkerPorts(pod, AnnotationKVEventsPort, nPorts)
	if w != "" {
		warns = append(warns, w)
	}
	replay, w = perWorkerPorts(pod, AnnotationKVEventsReplayPort, nPorts)
	if w != "" {
		warns = append(warns, w)
	}
	if replay != nil && pub == nil {
		warns = append(warns, fmt.Sprintf("%s annotation on pod %s without a valid %s: ignoring it; add the publisher's port",
			AnnotationKVEventsReplayPort, pod.Key(), AnnotationKVEventsPort))
		replay = nil
	}
	return pub, replay, warns
}

// perWorkerPorts returns one port per worker port from the annotation, or nil: a single value
// applies to every worker port, a list needs one entry per worker port, anything else is
// ignored with a warning.
func perWorkerPorts(pod *Pod, annotation string, nPorts int) (ports []int, warn string) {
	v, ok := pod.Annotations[annotation]
	if !ok {
		return nil, ""
	}
	list, err := parsePortList(v, false)
	if err != nil {
		return nil, fmt.Sprintf("invalid %s annotation on pod %s: %v; ignoring it", annotation, pod.Key(), err)
	}
	switch len(list) {
	case 1:
		out := make([]int, nPorts)
		for i := range out {
			out[i] = list[0]
		}
		return out, ""
	case nPorts:
		return list, ""
	}
	return nil, fmt.Sprintf("invalid %s annotation on pod %s: %d ports for %d worker ports; give one port or one per worker port; ignoring it",
		annotation, pod.Key(), len(list), nPorts)
}

// kvEngineIDs returns one engine id per worker port, or nil: one id for a single-port pod, or
// a list of distinct non-empty ids in worker-port order; anything else is ignored with a
// warning.
func kvEngineIDs(pod *Pod, annotation string, nPorts int) (ids []string, warn string) {
	v, ok := pod.Annotations[annotation]
	if !ok {
		return nil, ""
	}
	ids = strings.Split(v, ",")
	seen := map[string]bool{}
	for i, id := range ids {
		id = strings.TrimSpace(id)
		ids[i] = id
		if id == "" || seen[id] {
			return nil, fmt.Sprintf("invalid %s annotation on pod %s: empty or duplicate engine id; ignoring it", annotation, pod.Key())
		}
		seen[id] = true
	}
	if len(ids) != nPorts {
		return nil, fmt.Sprintf("invalid %s annotation on pod %s: %d engine ids for %d worker ports; give one per worker port; ignoring it",
			annotation, pod.Key(), len(ids), nPorts)
	}
	return ids, ""
}

// Known KV connectors; any other value is kept and handled as passthrough.
var knownKVConnectors = map[string]bool{"NixlConnector": true, "MooncakeConnector": true}

// kvConnector returns the pod's KV connector annotation, warning about unknown values.
func kvConnector(pod *Pod, annotation string) (string, string) {
	v := strings.TrimSpace(pod.Annotations[annotation])
	if v == "" || knownKVConnectors[v] {
		return v, ""
	}
	return v, fmt.Sprintf("unknown %s %q on pod %s: kept, handled as passthrough (known: NixlConnector, MooncakeConnector)", annotation, v, pod.Key())
}
