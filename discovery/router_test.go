package discovery

import (
	"reflect"
	"strings"
	"testing"
)

func TestRouterTracker(t *testing.T) {
	tr := &RouterTracker{Selector: Selector{"app": "smg"}, MeshPort: 39527}
	smg := map[string]string{"app": "smg"}
	ready := func(name, ip string, ann map[string]string) Pod { return readyPod(name, ip, smg, ann) }
	unready := func(p Pod) Pod { p.Ready = false; return p }
	terminating := func(p Pod) Pod { p.Terminating = true; return p }
	m := func(name, addr string, s MemberStatus) Member {
		return Member{Name: name, UID: "uid-" + name, Addr: addr, Status: s}
	}
	steps := []struct {
		name string
		pods []Pod
		want []Member
		warn string
	}{
		{"not ready and unknown: nothing", []Pod{unready(ready("smg-0", "10.0.0.1", nil))}, nil, ""},
		{"ready: alive at the annotated port or our own",
			[]Pod{ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"}), ready("smg-1", "10.0.0.2", nil),
				readyPod("worker-0", "10.0.0.9", map[string]string{"app": "sglang"}, nil)},
			[]Member{m("smg-0", "10.0.0.1:40000", MemberAlive), m("smg-1", "10.0.0.2:39527", MemberAlive)}, ""},
		{"unchanged: nothing",
			[]Pod{ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"}), ready("smg-1", "10.0.0.2", nil)}, nil, ""},
		{"known and not ready: suspected; invalid annotation falls back with a warning",
			[]Pod{unready(ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"})), ready("smg-1", "10.0.0.2", map[string]string{AnnotationMeshPort: "mesh"})},
			[]Member{m("smg-0", "10.0.0.1:40000", MemberSuspected)}, "invalid sglang.ai/mesh-port annotation"},
		{"terminating: down", []Pod{terminating(ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"})), ready("smg-1", "10.0.0.2", nil)},
			[]Member{m("smg-0", "10.0.0.1:40000", MemberDown)}, ""},
		{"down stays down while not ready", []Pod{unready(ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"})), ready("smg-1", "10.0.0.2", nil)}, nil, ""},
		{"deleted: down once", []Pod{ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"})},
			[]Member{m("smg-0", "10.0.0.1:40000", MemberAlive), m("smg-1", "10.0.0.2:39527", MemberDown)}, ""},
		{"deleted again: no repeat", []Pod{ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"})}, nil, ""},
		{"restarted pod rejoins under its name at its new IP", []Pod{ready("smg-0", "10.0.0.1", map[string]string{AnnotationMeshPort: "40000"}), ready("smg-1", "10.0.0.7", nil)},
			[]Member{m("smg-1", "10.0.0.7:39527", MemberAlive)}, ""},
	}
	for _, s := range steps {
		got, warns := tr.Update(s.pods)
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: changes %+v, want %+v", s.name, got, s.want)
		}
		if s.warn != "" && (len(warns) == 0 || !strings.Contains(warns[0], s.warn)) {
			t.Fatalf("%s: warnings %v, want %q", s.name, warns, s.warn)
		}
	}
}

func TestRouterDiscoveryEnabled(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		on   bool
		want string
	}{
		{Config{}, false, ""},
		{Config{RouterSelector: []string{"app=smg"}, MeshEnabled: true}, false, LogRouterNeedsDiscover},
		{Config{RouterSelector: []string{"app=smg"}, Enabled: true}, false, LogRouterMeshDisabled},
		{Config{RouterSelector: []string{"app=smg"}, Enabled: true, MeshEnabled: true}, true, ""},
	} {
		on, msg := tc.cfg.RouterDiscoveryEnabled()
		if on != tc.on || msg != tc.want {
			t.Errorf("%+v: %v %q, want %v %q", tc.cfg, on, msg, tc.on, tc.want)
		}
	}
}
