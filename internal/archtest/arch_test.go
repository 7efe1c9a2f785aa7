package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/smg-go/smg"

type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string // of the package's own _test.go files
	XTestImports []string // of its external (package x_test) test files
	Deps         []string
}

// ours strips the module prefix: "github.com/smg-go/smg/worker" → "worker".
func ours(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

func under(rel, root string) bool { return rel == root || strings.HasPrefix(rel, root+"/") }

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func top(rel string) string { return strings.SplitN(rel, "/", 2)[0] }

// layers lists, per top-level package, the other top-level packages of ours it may import
// (docs/architecture.md), besides internal/... and its own family (see family). mesh does not import
// policy: it declares the interfaces it needs, and cmd/smg adapts the policies to them.
var layers = map[string][]string{
	"radix":  {},
	"worker": {},
	"policy": {"worker", "radix"},
	// fastpath serves gRPC workers' models: it tokenizes and drives the engine client.
	"fastpath":   {"policy", "worker", "engine", "tokenizer", "telemetry"},
	"mesh":       {"worker", "radix"},
	"discovery":  {"worker"},
	"mockworker": {},
	"loadgen":    {},
	// The engine layer speaks token ids: it tokenizes prompts and detokenizes answers.
	"engine":    {"worker", "tokenizer"},
	"tokenizer": {},
	// The KV-event consumers speak the engines' own protocols (engine/sglangpb's
	// SubscribeKvEvents) and key workers as the registry does.
	"kvevents": {"worker", "engine"},
	// telemetry/trace exports the records' spans with the OpenTelemetry SDK.
	"telemetry": {"worker"},
	// deploy holds only the tests of the manifests, the dashboard and the alert rules, which
	// run the built binaries.
	"deploy": {},
	// hack holds the build tools beside the scripts (the image builder): none imports ours.
	"hack": {},
}

// parts lists the sub-packages a package is built from and may import: helpers of its own
// (mesh/wire), not members of a plugin family (policy does not import policy/<name>).
var parts = map[string][]string{
	"fastpath": {"fastpath/disagg", "fastpath/evloop", "fastpath/extract"},
	"mesh":     {"mesh/wire"},
	// worker hands its unexported bookkeeping to worker/workertest through worker/internal/testhooks.
	"worker":            {"worker/breaker", "worker/internal/testhooks"},
	"worker/workertest": {"worker/internal/testhooks"},
	// The tokenizer's pre-tokenizer split patterns are compiled by tokenizer/split.
	"tokenizer": {"tokenizer/split"},
	// The engine client speaks both engines' generated protocols.
	"engine/grpcworker": {"engine/sglangpb", "engine/vllmpb"},
	// The OpenAI mapping builds the client's requests and reads its chunks.
	"engine/openai": {"engine/grpcworker"},
	// The consumers feed the block index they are built around.
	"kvevents": {"kvevents/kvindex"},
}

// shared lists the helper packages every member of a family may import: the consistent-hash
// ring serves consistent_hashing and prefix_hash alike, the expected-wait score three policies,
// the pins of sticky sessions manual and the sticky wrapper; the engines' generated packages
// (engine/sglangpb, engine/vllmpb) share the messages of engine/commonpb.
var shared = map[string][]string{
	"policy": {"policy/ring", "policy/score", "policy/sticky"},
	"engine": {"engine/commonpb"},
}

// tables are the packages that assemble a family: policy/all is the name → builder table of
// every policy/<name>.
var tables = map[string]string{"policy/all": "policy"}

// family reports whether from may import to, both in the same top-level family: a package
// imports its ancestors (policy/cacheaware → policy), its listed parts, and a table imports
// its family's members; siblings never import one another, so each policy, health check or
// codec stays replaceable on its own.
func family(from, to string) bool {
	if under(from, to) {
		return true // an ancestor, or itself
	}
	for _, p := range parts[from] {
		if under(to, p) {
			return true
		}
	}
	for _, h := range shared[top(from)] {
		if under(to, h) && !under(from, h) {
			return true
		}
	}
	return tables[from] != "" && under(to, tables[from])
}

// testHelper reports whether to is a package that exists for tests: internal/testutil, or a
// <family>test package (policy/policytest, discovery/k8s/k8stest, loadgen/loadgentest).
func testHelper(to string) bool {
	last := to[strings.LastIndex(to, "/")+1:]
	return under(to, "internal/testutil") || strings.HasSuffix(last, "test") && !under(to, "internal")
}

// helperUse reports whether non-test code of from may import to: a <family>test package only
// from another test helper, bench or cmd, so that production code cannot set by hand what a
// test helper sets (worker/workertest moves a worker's counters past worker.Hold).
func helperUse(from, to string) bool {
	return !testHelper(to) || under(to, "internal/testutil") || testHelper(from) || top(from) == "cmd" || top(from) == "bench"
}

// wire lists the gateway packages an oracle may import, exactly: a mock engine speaks the
// engines' generated gRPC packages and encodes with the gateway's tokenizer, because a real
// engine shares the wire and the vocabulary with the gateway (its answers must decode).
var wire = map[string][]string{"mockworker": {"engine/sglangpb", "engine/vllmpb", "engine/commonpb", "tokenizer", "tokenizer/chat"}}

func onWire(from, to string) bool { return slices.Contains(wire[top(from)], to) }

// wireDep reports whether d may be among an oracle's dependencies: a wire package or one of
// the parts it is built from (see parts).
func wireDep(from, d string) bool {
	for _, w := range wire[top(from)] {
		if d == w || slices.ContainsFunc(parts[w], func(p string) bool { return under(d, p) }) {
			return true
		}
	}
	return false
}

// oracle reports whether to is one of the black-box oracles (docs/architecture.md): tests anywhere
// run real mock engines and load.
func oracle(to string) bool { return under(to, "mockworker") || under(to, "loadgen") }

// testUses are the test-only imports beyond the layers, each for a claim that needs the real
// component: mesh's tree-sync tests route with the real cache_aware policy to prove that a
// peer makes the same decisions (the production mesh sees only its Trees interface).
// kvevents' tests route with the real cache_aware on an index a real mock engine fed, to prove
// the index is the EventIndex the policy reads.
var testUses = map[string][]string{"mesh": {"policy"}, "kvevents": {"policy"}}

// allowed reports whether package from may import package to (both relative to the module).
func allowed(from, to string) bool {
	switch {
	case under(to, "cmd"):
		return false
	case under(from, "internal"):
		return under(to, "internal")
	case under(to, "internal"), top(from) == "cmd", top(from) == "bench":
		return true
	case top(from) == top(to):
		return family(from, to)
	case onWire(from, to):
		return true
	}
	for _, ok := range layers[top(from)] {
		if top(to) == ok {
			return true
		}
	}
	return false
}

// allowedInTest reports whether a test of from may import to: what from may import, plus the
// test helpers, the oracles, testUses and its whole family (policy's tests build policies
// through policy/all; least_load's compare it with round_robin). Layers still hold: a test of
// worker cannot import policy.
func allowedInTest(from, to string) bool {
	switch {
	case under(to, "cmd"):
		return false
	case allowed(from, to), testHelper(to), oracle(to) && !oracle(from), top(from) == top(to):
		return true
	}
	for _, ok := range testUses[top(from)] {
		if top(to) == ok {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		from, _ := ours(p.ImportPath)
		for _, imp := range p.Imports {
			to, mine := ours(imp)
			if !mine {
				continue
			}
			if under(to, "cmd") {
				t.Errorf("%s imports %s: nothing imports cmd/", from, to)
			}
			if !allowed(from, to) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow", from, to)
			}
			if !helperUse(from, to) {
				t.Errorf("%s imports %s, which exists for tests: import it from _test.go files only", from, to)
			}
		}
		for _, imps := range [][]string{p.TestImports, p.XTestImports} {
			for _, imp := range imps {
				if to, mine := ours(imp); mine && !allowedInTest(from, to) {
					t.Errorf("a test of %s imports %s, which docs/architecture.md does not allow", from, to)
				}
			}
		}
		for _, dep := range p.Deps {
			switch {
			case strings.HasPrefix(dep, "k8s.io/client-go") && !under(from, "discovery/k8s") && !under(from, "cmd") && !under(from, "bench") && from != "internal/e2e":
				t.Errorf("%s depends on client-go, which only discovery/k8s may use", from)
			case strings.HasPrefix(dep, "google.golang.org/grpc") && !under(from, "mesh") && !under(from, "engine") && from != "kvevents" && !under(from, "mockworker") && !under(from, "telemetry/trace") && !under(from, "cmd") && !under(from, "bench") && from != "internal/e2e" && from != "fastpath":
				t.Errorf("%s depends on grpc, which only mesh, engine, kvevents, mockworker (the engines' wire) and telemetry/trace (OTLP) may use", from)
			case strings.HasPrefix(dep, "go.opentelemetry.io/") && !under(from, "telemetry/trace") && !under(from, "cmd") && !under(from, "bench"):
				t.Errorf("%s depends on %s: the OpenTelemetry SDK stays in telemetry/trace, off the data plane (fastpath keeps the trace context itself, internal/traceparent)", from, dep)
			}
		}
		// fastpath reaches grpc only through the engine client: it imports none of it itself.
		for _, imp := range p.Imports {
			if from == "fastpath" && strings.HasPrefix(imp, "google.golang.org/grpc") {
				t.Errorf("fastpath imports %s: the engine client (engine/grpcworker) owns every gRPC call", imp)
			}
		}
		if _, known := layers[top(from)]; !known && !under(from, "internal") && top(from) != "cmd" && top(from) != "bench" && from != "" {
			t.Errorf("package %s is not in docs/architecture.md's table: add it to layers", from)
		}
		// fastpath, mesh and discovery meet only in cmd/: none depends on another.
		for _, a := range []string{"fastpath", "mesh", "discovery"} {
			if !under(from, a) {
				continue
			}
			for _, dep := range p.Deps {
				d, mine := ours(dep)
				for _, b := range []string{"fastpath", "mesh", "discovery"} {
					if mine && a != b && under(d, b) {
						t.Errorf("%s depends on %s: fastpath, mesh and discovery never import one another", from, d)
					}
				}
			}
		}
		// Flags are parsed in cmd/ only (docs/architecture.md): packages expose DefaultConfig and
		// Validate, and nothing else imports the flag package.
		for _, imp := range p.Imports {
			if to, mine := ours(imp); mine && under(to, "internal/cli") && top(from) != "cmd" && top(from) != "bench" {
				t.Errorf("%s imports internal/cli: flags are registered in cmd/ only; expose DefaultConfig and Validate instead", from)
			}
		}
		// The oracles import no gateway package, even indirectly.
		if under(from, "mockworker") || under(from, "loadgen") {
			for _, dep := range p.Deps {
				if d, mine := ours(dep); mine && !under(d, "internal") && !under(d, strings.SplitN(from, "/", 2)[0]) && !wireDep(from, d) {
					t.Errorf("%s depends on %s: mock engines and the load generator are black-box oracles", from, d)
				}
			}
		}
	}
}

// TestRulesCatchViolations makes sure the rule table can fail.
func TestRulesCatchViolations(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"fastpath", "policy", true},
		{"fastpath", "worker", true},
		{"fastpath", "mesh", false},
		{"worker", "policy", false},
		{"radix", "worker", false},
		{"policy/roundrobin", "policy", true},
		{"policy/cacheaware", "radix", true},
		{"worker/health", "worker", true},
		{"mockworker", "worker", false},
		{"mockworker", "engine/sglangpb", true},
		{"mockworker", "engine/vllmpb", true},
		{"mockworker", "engine/commonpb", true},
		{"mockworker", "tokenizer", true},
		{"mockworker/mockworkertest", "engine/sglangpb", true},
		{"mockworker", "tokenizer/chat", true},
		{"mockworker", "engine/openai", false},
		{"mockworker", "engine", false},
		{"loadgen", "engine/sglangpb", false},
		{"loadgen", "tokenizer", false},
		{"internal/cli", "worker", false},
		{"internal/cli", "internal/x", true},
		{"discovery/k8s", "discovery", true},
		{"engine/grpcworker", "engine/sglangpb", true},
		{"engine/grpcworker", "engine/vllmpb", true},
		{"engine/grpcworker", "engine/commonpb", true},
		{"engine/sglangpb", "engine/vllmpb", false},
		{"discovery", "fastpath", false},
		{"mesh", "policy", false},
		{"mesh", "mesh/wire", true},
		{"mesh/wire", "mesh", true},
		{"policy", "policy/cacheaware", false},
		{"policy/cacheaware", "policy/leastload", false},
		{"policy/all", "policy/cacheaware", true},
		{"policy/prefixhash", "policy/ring", true},
		{"policy/ring", "policy/prefixhash", false},
		{"worker/health", "worker/loadmon", false},
		{"worker", "worker/health", false},
		{"worker", "worker/breaker", true},
		{"discovery", "discovery/k8s", false},
		{"engine", "worker", true},
		{"engine", "policy", false},
		{"engine/sglangpb", "engine/commonpb", true},
		{"engine/vllmpb", "engine/commonpb", true},
		{"engine/sglangpb", "engine/vllmpb", false},
		{"engine/commonpb", "engine/sglangpb", false},
		{"worker", "engine/sglangpb", false},
		{"kvevents", "engine/sglangpb", true},
		{"kvevents", "kvevents/kvindex", true},
		{"kvevents/kvindex", "kvevents", true},
		{"kvevents", "policy", false},
		{"mockworker", "kvevents", false},
		{"mockworker", "kvevents/kvindex", false},
	} {
		if got := allowed(tc.from, tc.to); got != tc.ok {
			t.Errorf("allowed(%s → %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"policy/leastload", "policy/policytest", true},
		{"policy/leastload", "internal/testutil", true},
		{"policy/leastload", "policy/roundrobin", true},
		{"policy", "policy/all", true},
		{"worker", "policy", false},
		{"mesh", "fastpath", false},
		{"mockworker", "loadgen", false},
		{"discovery/k8s", "mockworker", true},
		{"internal/e2e", "discovery/k8s/k8stest", true},
		{"internal/e2e", "worker", false},
		{"mesh", "policy/cacheaware", true},
		{"fastpath", "cmd/smg", false},
	} {
		if got := allowedInTest(tc.from, tc.to); got != tc.ok {
			t.Errorf("allowedInTest(%s → %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"policy/leastload", "worker/workertest", false},
		{"fastpath", "worker/workertest", false},
		{"policy/policytest", "worker/workertest", true},
		{"bench", "telemetry/trace/tracetest", true},
		{"cmd/loadgen", "loadgen/loadgentest", true},
		{"fastpath", "internal/testutil", true},
		{"worker/workertest", "worker/internal/testhooks", true},
	} {
		if got := helperUse(tc.from, tc.to); got != tc.ok {
			t.Errorf("helperUse(%s → %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
	if !allowed("worker/workertest", "worker/internal/testhooks") {
		t.Error("worker/workertest may not import worker/internal/testhooks, its way to the worker's bookkeeping")
	}
}
