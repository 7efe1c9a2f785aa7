package discovery

import (
	"strings"
	"testing"
)

// FuzzAnnotations feeds arbitrary annotation values to the mapping: it must never panic, every
// worker spec (URL, KV-event endpoints) must be valid, and a pod always contributes at least
// one worker.
func FuzzAnnotations(f *testing.F) {
	for _, s := range [][4]string{
		{"8000,8001,8002,8003", "8998", "e0", "5557"},
		{"8000,8000", "9000,9001", "a,b", "5557,5567"},
		{"", "", "", ""},
		{"0,65536", "x", ",,", "0"},
		{" 80 , 81 ", "1,2,3", "a, b", " 5557 , 65535 "},
		{"+80", "-1", "dup,dup", "tcp://x:1"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	m := &Mapping{Prefill: Selector{"role": "prefill"}, Port: 8000,
		KVConnectorAnnotation: DefaultKVConnectorAnnotation, KVEngineIDAnnotation: DefaultKVEngineIDAnnotation}
	f.Fuzz(func(t *testing.T, ports, boot, engines, events string) {
		pod := readyPod("p", "10.0.0.1", map[string]string{"role": "prefill"}, map[string]string{
			AnnotationWorkerPorts: ports, AnnotationBootstrapPort: boot, DefaultKVEngineIDAnnotation: engines,
			AnnotationKVEventsPort: events, AnnotationKVEventsReplayPort: events})
		got, _ := m.Desired([]Pod{pod})
		if len(got) == 0 {
			t.Fatal("a Ready matching pod contributed no worker")
		}
		seen := map[string]bool{}
		for _, d := range got {
			spec := d.Spec()
			if err := spec.Normalize(); err != nil {
				t.Fatalf("worker %q: %v", d.URL, err)
			}
			if seen[d.URL] {
				t.Fatalf("worker %q twice", d.URL)
			}
			seen[d.URL] = true
			if d.KVEngineID != "" && strings.Contains(d.KVEngineID, ",") {
				t.Fatalf("engine id %q holds a list", d.KVEngineID)
			}
		}
	})
}

// FuzzSelector: ParseSelector never panics, and a parsed selector round-trips through String.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{"app=sglang", "a=b,c=d", "a", "=", "a=b=c", "a=,b=", " k = v "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector([]string{s})
		if err != nil {
			return
		}
		again, err := ParseSelector([]string{sel.String()})
		if err != nil && len(sel) > 0 {
			t.Fatalf("%q → %q does not parse: %v", s, sel.String(), err)
		}
		if err == nil && again.String() != sel.String() {
			t.Fatalf("%q → %q → %q", s, sel.String(), again.String())
		}
	})
}
