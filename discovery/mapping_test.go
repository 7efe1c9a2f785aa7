package discovery

import (
	"reflect"
	"strings"
	"testing"

	"github.com/smg-go/smg/worker"
)

func readyPod(name, ip string, labels map[string]string, ann map[string]string) Pod {
	return Pod{Namespace: "ns", Name: name, UID: "uid-" + name, Labels: labels, Annotations: ann,
		IP: ip, Running: true, Ready: true}
}

var app = map[string]string{"app": "sglang"}

func urls(ds []Desired) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.URL)
	}
	return out
}

func TestDesiredRules(t *testing.T) {
	regular := &Mapping{Selector: Selector{"app": "sglang"}, Port: 8000}
	terminating := readyPod("t", "10.0.0.9", app, nil)
	terminating.Terminating = true
	noIP := readyPod("n", "", app, nil)
	pending := readyPod("p", "10.0.0.8", app, nil)
	pending.Running = false
	unready := readyPod("u", "10.0.0.7", app, nil)
	unready.Ready = false
	tests := []struct {
		name     string
		pods     []Pod
		want     []string
		warnings []string
	}{
		{"ready pod, default port", []Pod{readyPod("a", "10.0.0.1", app, nil)}, []string{"http://10.0.0.1:8000"}, nil},
		{"labels do not match", []Pod{readyPod("a", "10.0.0.1", map[string]string{"app": "other"}, nil)}, nil, nil},
		{"no labels", []Pod{readyPod("a", "10.0.0.1", nil, nil)}, nil, nil},
		{"terminating", []Pod{terminating}, nil, nil},
		{"no IP", []Pod{noIP}, nil, nil},
		{"not running", []Pod{pending}, nil, nil},
		{"not ready", []Pod{unready}, nil, nil},
		{"multi-port in order", []Pod{readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: "8003,8001, 8002"})},
			[]string{"http://10.0.0.1:8001", "http://10.0.0.1:8002", "http://10.0.0.1:8003"}, nil},
		{"duplicate ports ignored", []Pod{readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: "8000,8000,8001"})},
			[]string{"http://10.0.0.1:8000", "http://10.0.0.1:8001"}, nil},
		{"invalid entry falls back with a warning", []Pod{readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: "8000,http"})},
			[]string{"http://10.0.0.1:8000"}, []string{"invalid smg.ai/worker-ports annotation on pod ns/a"}},
		{"port 0 is invalid", []Pod{readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: "0"})},
			[]string{"http://10.0.0.1:8000"}, []string{"invalid smg.ai/worker-ports annotation"}},
		{"port above 65535 is invalid", []Pod{readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: "9001,65536"})},
			[]string{"http://10.0.0.1:8000"}, []string{"invalid smg.ai/worker-ports annotation"}},
		{"empty annotation is invalid", []Pod{readyPod("a", "10.0.0.1", app, map[string]string{AnnotationWorkerPorts: ""})},
			[]string{"http://10.0.0.1:8000"}, []string{"invalid smg.ai/worker-ports annotation"}},
		{"IPv6 in brackets", []Pod{readyPod("a", "fd00::1", app, nil)}, []string{"http://[fd00::1]:8000"}, nil},
		{"two pods at one address: first by name wins", []Pod{readyPod("b", "10.0.0.1", app, nil), readyPod("a", "10.0.0.1", app, nil)},
			[]string{"http://10.0.0.1:8000"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := regular.Desired(tc.pods)
			if !reflect.DeepEqual(urls(got), tc.want) {
				t.Fatalf("workers %v, want %v", urls(got), tc.want)
			}
			if len(warns) != len(tc.warnings) {
				t.Fatalf("warnings %v, want %v", warns, tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.Contains(warns[i].Message, w) {
					t.Errorf("warning %q does not contain %q", warns[i].Message, w)
				}
			}
			for _, d := range got {
				if d.Role != worker.TypeRegular {
					t.Errorf("role %q, want regular", d.Role)
				}
			}
		})
	}
	if got, _ := regular.Desired([]Pod{readyPod("b", "10.0.0.1", app, nil), readyPod("a", "10.0.0.1", app, nil)}); got[0].PodName != "a" {
		t.Errorf("address claimed by pod %s, want a", got[0].PodName)
	}
}

func TestDesiredSpecCarriesOwnership(t *testing.T) {
	m := &Mapping{Selector: Selector{"app": "sglang"}, Port: 8000}
	got, _ := m.Desired([]Pod{readyPod("a", "10.0.0.1", app, nil)})
	spec := got[0].Spec()
	want := map[string]string{LabelPodName: "a", LabelPodUID: "uid-a", LabelPodNamespace: "ns", LabelDiscovered: "true"}
	if !reflect.DeepEqual(spec.Labels, want) {
		t.Errorf("labels %v, want %v", spec.Labels, want)
	}
	if err := spec.Normalize(); err != nil || spec.URL != "http://10.0.0.1:8000" {
		t.Errorf("spec %+v does not normalize to its URL: %v", spec, err)
	}
}

func TestDesiredModelIDFrom(t *testing.T) {
	pod := readyPod("a", "10.0.0.1", map[string]string{"app": "sglang", "model": "llama"}, map[string]string{"smg.ai/model": "qwen"})
	for _, tc := range []struct{ from, want string }{{"", ""}, {"namespace", "ns"}, {"label:model", "llama"}, {"annotation:smg.ai/model", "qwen"}, {"label:missing", ""}} {
		src, err := ParseModelIDSource(tc.from)
		if err != nil {
			t.Fatal(err)
		}
		m := &Mapping{Selector: Selector{"app": "sglang"}, Port: 80, ModelID: src}
		got, _ := m.Desired([]Pod{pod})
		if got[0].ModelID != tc.want {
			t.Errorf("--model-id-from %q: model %q, want %q", tc.from, got[0].ModelID, tc.want)
		}
	}
	for _, bad := range []string{"label:", "annotation", "pod", "label: "} {
		if _, err := ParseModelIDSource(bad); err == nil || !strings.Contains(err.Error(), "namespace, label:<key> or annotation:<key>") {
			t.Errorf("--model-id-from %q: error %v, want one that lists the forms", bad, err)
		}
	}
}

func TestDesiredPDRoles(t *testing.T) {
	m := &Mapping{
		Prefill: Selector{"app": "vllm", "role": "prefill"},
		Decode:  Selector{"app": "vllm", "role": "decode"},
		Encode:  Selector{"app": "vllm", "tier": "encode"},
		Port:    8000, KVConnectorAnnotation: DefaultKVConnectorAnnotation, KVEngineIDAnnotation: DefaultKVEngineIDAnnotation,
	}
	lbl := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name     string
		pod      Pod
		want     []Desired
		warnings int
	}{
		{"prefill with one bootstrap port and kv metadata",
			readyPod("p", "10.0.0.1", lbl("app", "vllm", "role", "prefill"), map[string]string{
				AnnotationBootstrapPort: "8998", "smg.ai/kv-connector": "MooncakeConnector", "smg.ai/kv-engine-id": "prefill-0"}),
			[]Desired{{URL: "http://10.0.0.1:8000", Role: "prefill", BootstrapPort: 8998, KVConnector: "MooncakeConnector", KVEngineID: "prefill-0"}}, 0},
		{"decode ignores bootstrap ports",
			readyPod("d", "10.0.0.2", lbl("app", "vllm", "role", "decode"), map[string]string{AnnotationBootstrapPort: "8998", "smg.ai/kv-connector": "NixlConnector"}),
			[]Desired{{URL: "http://10.0.0.2:8000", Role: "decode", KVConnector: "NixlConnector"}}, 0},
		{"encode wins over prefill",
			readyPod("e", "10.0.0.3", lbl("app", "vllm", "role", "prefill", "tier", "encode"), nil),
			[]Desired{{URL: "http://10.0.0.3:8000", Role: "encode"}}, 0},
		{"prefill wins over decode",
			readyPod("x", "10.0.0.4", lbl("app", "vllm", "role", "prefill"), nil),
			[]Desired{{URL: "http://10.0.0.4:8000", Role: "prefill"}}, 0},
		{"no role matches", readyPod("n", "10.0.0.5", lbl("app", "vllm"), nil), nil, 0},
		{"bootstrap port per worker port",
			readyPod("p", "10.0.0.6", lbl("app", "vllm", "role", "prefill"), map[string]string{
				AnnotationWorkerPorts: "8000,8001", AnnotationBootstrapPort: "9000,9001", "smg.ai/kv-engine-id": "e0,e1"}),
			[]Desired{{URL: "http://10.0.0.6:8000", Role: "prefill", BootstrapPort: 9000, KVEngineID: "e0"},
				{URL: "http://10.0.0.6:8001", Role: "prefill", BootstrapPort: 9001, KVEngineID: "e1"}}, 0},
		{"bootstrap list of the wrong length is ignored",
			readyPod("p", "10.0.0.7", lbl("app", "vllm", "role", "prefill"), map[string]string{
				AnnotationWorkerPorts: "8000,8001,8002", AnnotationBootstrapPort: "9000,9001"}),
			[]Desired{{URL: "http://10.0.0.7:8000", Role: "prefill"}, {URL: "http://10.0.0.7:8001", Role: "prefill"}, {URL: "http://10.0.0.7:8002", Role: "prefill"}}, 1},
		{"bad bootstrap port is ignored",
			readyPod("p", "10.0.0.8", lbl("app", "vllm", "role", "prefill"), map[string]string{AnnotationBootstrapPort: "boot"}),
			[]Desired{{URL: "http://10.0.0.8:8000", Role: "prefill"}}, 1},
		{"duplicate engine ids are ignored",
			readyPod("p", "10.0.0.9", lbl("app", "vllm", "role", "prefill"), map[string]string{
				AnnotationWorkerPorts: "8000,8001", "smg.ai/kv-engine-id": "e0,e0"}),
			[]Desired{{URL: "http://10.0.0.9:8000", Role: "prefill"}, {URL: "http://10.0.0.9:8001", Role: "prefill"}}, 1},
		{"empty engine id is ignored",
			readyPod("p", "10.0.0.10", lbl("app", "vllm", "role", "prefill"), map[string]string{"smg.ai/kv-engine-id": " "}),
			[]Desired{{URL: "http://10.0.0.10:8000", Role: "prefill"}}, 1},
		{"engine id count mismatch is ignored",
			readyPod("p", "10.0.0.11", lbl("app", "vllm", "role", "prefill"), map[string]string{"smg.ai/kv-engine-id": "e0,e1"}),
			[]Desired{{URL: "http://10.0.0.11:8000", Role: "prefill"}}, 1},
		{"unknown connector kept with a warning",
			readyPod("d", "10.0.0.12", lbl("app", "vllm", "role", "decode"), map[string]string{"smg.ai/kv-connector": "LMCache"}),
			[]Desired{{URL: "http://10.0.0.12:8000", Role: "decode", KVConnector: "LMCache"}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := m.Desired([]Pod{tc.pod})
			for i := range got {
				got[i].PodName, got[i].PodNamespace, got[i].PodUID = "", "", ""
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			if len(warns) != tc.warnings {
				t.Errorf("warnings %v, want %d", warns, tc.warnings)
			}
		})
	}
	got, _ := m.Desired([]Pod{readyPod("p", "10.0.0.1", lbl("app", "vllm", "role", "prefill"), map[string]string{
		AnnotationBootstrapPort: "8998", "smg.ai/kv-connector": "MooncakeConnector", "smg.ai/kv-engine-id": "prefill-0"})})
	spec := got[0].Spec()
	if spec.WorkerType != worker.TypePrefill || spec.Labels[LabelBootstrapPort] != "8998" ||
		spec.Labels[LabelKVConnector] != "MooncakeConnector" || spec.Labels[LabelKVEngineID] != "prefill-0" {
		t.Errorf("PD spec %+v lacks its role or PD labels", spec)
	}
}

func TestSelector(t *testing.T) {
	s, err := ParseSelector([]string{"app=sglang", "env=prod,tier=gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != "app=sglang,env=prod,tier=gpu" {
		t.Errorf("String %q", got)
	}
	if !s.Matches(map[string]string{"app": "sglang", "env": "prod", "tier": "gpu", "x": "y"}) {
		t.Error("superset of labels must match")
	}
	if s.Matches(map[string]string{"app": "sglang", "env": "prod"}) {
		t.Error("all pairs must match")
	}
	if !(Selector{}).Matches(nil) {
		t.Error("the empty selector matches every pod")
	}
	for _, bad := range [][]string{{"app"}, {"=x"}, {"a=b=c"}, {"a!=b"}, {"a=1", "a=2"}} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) accepted", bad)
		}
	}
	c := Common(Selector{"app": "vllm", "role": "prefill"}, Selector{"app": "vllm", "role": "decode"})
	if !reflect.DeepEqual(c, Selector{"app": "vllm"}) {
		t.Errorf("Common %v", c)
	}
}

// TestDesiredKVEventsEndpoints: smg.ai/kv-events-port (and its replay port) become each
// worker's tcp://<pod-ip>:<port> sockets, one value for every worker port or one per worker
// port; an invalid value, a list of the wrong length or a replay port alone is ignored with a
// warning that names the annotation.
func TestDesiredKVEventsEndpoints(t *testing.T) {
	m := &Mapping{Selector: Selector{"app": "sglang"}, Port: 8000}
	type eps struct{ url, pub, replay string }
	tests := []struct {
		name string
		ann  map[string]string
		want []eps
		warn string
	}{
		{"none", nil, []eps{{"http://10.0.0.1:8000", "", ""}}, ""},
		{"one port", map[string]string{AnnotationKVEventsPort: "5557", AnnotationKVEventsReplayPort: "5558"},
			[]eps{{"http://10.0.0.1:8000", "tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558"}}, ""},
		{"one port for every worker port", map[string]string{AnnotationWorkerPorts: "8000,8001", AnnotationKVEventsPort: "5557"},
			[]eps{{"http://10.0.0.1:8000", "tcp://10.0.0.1:5557", ""}, {"http://10.0.0.1:8001", "tcp://10.0.0.1:5557", ""}}, ""},
		{"one per worker port", map[string]string{AnnotationWorkerPorts: "8000,8001", AnnotationKVEventsPort: "5557,5567", AnnotationKVEventsReplayPort: "5558,5568"},
			[]eps{{"http://10.0.0.1:8000", "tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558"}, {"http://10.0.0.1:8001", "tcp://10.0.0.1:5567", "tcp://10.0.0.1:5568"}}, ""},
		{"wrong length", map[string]string{AnnotationWorkerPorts: "8000,8001,8002", AnnotationKVEventsPort: "5557,5567"},
			[]eps{{"http://10.0.0.1:8000", "", ""}, {"http://10.0.0.1:8001", "", ""}, {"http://10.0.0.1:8002", "", ""}}, "invalid smg.ai/kv-events-port annotation on pod ns/a: 2 ports for 3 worker ports"},
		{"not a port", map[string]string{AnnotationKVEventsPort: "zmq"}, []eps{{"http://10.0.0.1:8000", "", ""}}, "invalid smg.ai/kv-events-port annotation"},
		{"replay alone", map[string]string{AnnotationKVEventsReplayPort: "5558"}, []eps{{"http://10.0.0.1:8000", "", ""}}, "without a valid smg.ai/kv-events-port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := m.Desired([]Pod{readyPod("a", "10.0.0.1", app, tc.ann)})
			var have []eps
			for _, d := range got {
				s := d.Spec()
				if s.KVEventsEndpoint != d.KVEventsEndpoint || s.KVEventsReplayEndpoint != d.KVEventsReplayEndpoint {
					t.Fatalf("Spec() %+v does not carry the endpoints of %+v", s, d)
				}
				have = append(have, eps{d.URL, d.KVEventsEndpoint, d.KVEventsReplayEndpoint})
			}
			if !reflect.DeepEqual(have, tc.want) {
				t.Fatalf("got %+v, want %+v", have, tc.want)
			}
			switch {
			case tc.warn == "" && len(warns) != 0:
				t.Errorf("warnings %v, want none", warns)
			case tc.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0].Message, tc.warn)):
				t.Errorf("warnings %v, want one containing %q", warns, tc.warn)
			}
		})
	}
}
