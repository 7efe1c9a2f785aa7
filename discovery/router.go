package discovery

import (
	"fmt"
	"net"
	"sort"
	"strconv"
)

// MemberStatus is a mesh membership status as router discovery writes it
// (high-availability.md: Kubernetes Router Discovery).
type MemberStatus string

const (
	MemberAlive     MemberStatus = "ALIVE"
	MemberSuspected MemberStatus = "SUSPECTED"
	MemberDown      MemberStatus = "DOWN"
)

// Router discovery's log messages when it cannot start (high-availability.md).
const (
	LogRouterMeshDisabled  = "Router selector configured but mesh is not enabled"
	LogRouterNeedsDiscover = "Router selector configured but service discovery is not enabled"
)

// RouterDiscoveryEnabled reports whether router discovery should run, and otherwise the
// message to log (empty when no --router-selector was given: nothing to say).
func (c *Config) RouterDiscoveryEnabled() (bool, string) {
	switch {
	case len(c.RouterSelector) == 0:
		return false, ""
	case !c.Enabled:
		return false, LogRouterNeedsDiscover
	case !c.MeshEnabled:
		return false, LogRouterMeshDisabled
	}
	return true, ""
}

// Member is a peer router as router discovery reports it to the mesh: named by its pod
// name (the spec asks --mesh-server-name to equal it), dialled at the pod IP.
type Member struct {
	Name   string
	UID    string
	Addr   string // ip:mesh-port
	Status MemberStatus
}

// RouterTracker maps router pods to membership changes. It remembers what it reported so
// that a pod deleted from the cache is reported DOWN once, and a not-Ready pod becomes
// SUSPECTED only when it was known and not DOWN. Not safe for concurrent use.
type RouterTracker struct {
	Selector Selector
	// MeshPort is this gateway's --mesh-port, dialled for pods without a valid
	// sglang.ai/mesh-port annotation.
	MeshPort int
	known    map[string]Member // by pod namespace/name
}

// Update takes the router pods of the cache and returns the members whose status or
// address changed since the last call, sorted by name, and warnings about invalid mesh-port
// annotations.
func (t *RouterTracker) Update(pods []Pod) (changes []Member, warnings []string) {
	if t.known == nil {
		t.known = map[string]Member{}
	}
	seen := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if !t.Selector.Matches(p.Labels) {
			continue
		}
		key := p.Key()
		seen[key] = true
		prev, known := t.known[key]
		next := Member{Name: p.Name, UID: p.UID, Addr: prev.Addr}
		if p.IP != "" {
			port, warn := t.meshPort(p)
			if warn != "" {
				warnings = append(warnings, warn)
			}
			next.Addr = net.JoinHostPort(p.IP, strconv.Itoa(port))
		}
		switch {
		case p.Terminating:
			if !known {
				continue
			}
			next.Status = MemberDown
		case p.Serving():
			next.Status = MemberAlive
		default: // not Ready
			if !known || prev.Status == MemberDown {
				continue
			}
			next.Status = MemberSuspected
		}
		if !known || prev != next {
			t.known[key] = next
			changes = append(changes, next)
		}
	}
	for key, m := range t.known {
		if !seen[key] && m.Status != MemberDown {
			m.Status = MemberDown
			t.known[key] = m
			changes = append(changes, m)
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Name < changes[j].Name })
	return changes, warnings
}

func (t *RouterTracker) meshPort(p *Pod) (int, string) {
	v, ok := p.Annotations[AnnotationMeshPort]
	if !ok {
		return t.MeshPort, ""
	}
	port, valid := parsePort(v)
	if !valid {
		return t.MeshPort, fmt.Sprintf("invalid %s annotation %q on pod %s: dialling --mesh-port %d", AnnotationMeshPort, v, p.Key(), t.MeshPort)
	}
	return port, ""
}
