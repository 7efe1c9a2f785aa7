package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/smg-go/smg"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
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
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"/...")
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
// (DESIGN.md §2), besides internal/... and its own sub-packages.
var layers = map[string][]string{
	"radix":      {},
	"worker":     {},
	"policy":     {"worker", "radix"},
	"fastpath":   {"policy", "worker"},
	"mesh":       {"worker", "policy", "radix"},
	"discovery":  {"worker"},
	"mockworker": {},
	"loadgen":    {},
}

// allowed reports whether package from may import package to (both relative to the module).
func allowed(from, to string) bool {
	switch {
	case under(to, "cmd"):
		return false
	case under(from, "internal"):
		return under(to, "internal")
	case under(to, "internal"), top(from) == "cmd", top(from) == "bench", top(from) == top(to):
		return true
	}
	for _, ok := range layers[top(from)] {
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
				t.Errorf("%s imports %s, which DESIGN.md §2 does not allow", from, to)
			}
		}
		for _, dep := range p.Deps {
			switch {
			case strings.HasPrefix(dep, "k8s.io/client-go") && !under(from, "discovery/k8s") && !under(from, "cmd") && !under(from, "bench") && from != "internal/e2e":
				t.Errorf("%s depends on client-go, which only discovery/k8s may use", from)
			case strings.HasPrefix(dep, "google.golang.org/grpc") && !under(from, "mesh") && !under(from, "cmd") && !under(from, "bench") && from != "internal/e2e":
				t.Errorf("%s depends on grpc, which only mesh may use", from)
			}
		}
		if _, known := layers[top(from)]; !known && !under(from, "internal") && top(from) != "cmd" && top(from) != "bench" && from != "" {
			t.Errorf("package %s is not in DESIGN.md §2's table: add it to layers", from)
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
		// The oracles import no gateway package, even indirectly.
		if under(from, "mockworker") || under(from, "loadgen") {
			for _, dep := range p.Deps {
				if d, mine := ours(dep); mine && !under(d, "internal") && !under(d, strings.SplitN(from, "/", 2)[0]) {
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
		{"internal/cli", "worker", false},
		{"internal/cli", "internal/x", true},
		{"discovery/k8s", "discovery", true},
		{"discovery", "fastpath", false},
	} {
		if got := allowed(tc.from, tc.to); got != tc.ok {
			t.Errorf("allowed(%s → %s) = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}
