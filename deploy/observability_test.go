package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/e2e"
	"github.com/smg-go/smg/internal/testutil"
)

// metricName matches the gateway's series names inside a PromQL expression: the gateway's
// own families start with smg_ or router_ (the spec product's mesh names).
var metricName = regexp.MustCompile(`\b(?:smg|router)_[a-z0-9_]+\b`)

// exportedNames starts two meshed gateways in front of a mock engine, sends requests, and
// returns every series name their /metrics hold.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	mocks := e2e.StartMocks(t, 2)
	p1, p2 := e2e.FreePort(t, "127.0.0.1"), e2e.FreePort(t, "127.0.0.1")
	mesh := func(port int, peer string) []string {
		args := []string{"--enable-mesh", "--mesh-host", "127.0.0.1", "--mesh-port", strconv.Itoa(port), "--worker-urls", mocks.URLs[0], mocks.URLs[1]}
		if peer != "" {
			args = append(args, "--mesh-peer-urls", peer)
		}
		return args
	}
	g1 := e2e.StartGateway(t, mesh(p1, "")...)
	g2 := e2e.StartGateway(t, mesh(p2, "127.0.0.1:"+strconv.Itoa(p1))...)
	for i := 0; i < 4; i++ {
		e2e.MustDo(t, "POST", g1.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hello"}]}`, nil)
	}
	names := map[string]bool{}
	testutil.Eventually(t, "the mesh peer series", func() bool {
		// A router reports connections for the sync streams it accepts: either may be it.
		body := e2e.MustDo(t, "GET", g1.MetricsURL, "", nil).Body + e2e.MustDo(t, "GET", g2.MetricsURL, "", nil).Body
		for _, line := range strings.Split(body, "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				names[line[:i]] = true
			}
		}
		return names["router_mesh_peer_connections"]
	})
	return names
}

// exprsOfDashboard returns every PromQL expression of the dashboard: panel targets and
// templating queries.
func exprsOfDashboard(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("grafana/smg-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Type, Query string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/smg-dashboard.json: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Query)
		}
	}
	return exprs
}

// exprsOfRules returns every rule expression of the alert rules file.
func exprsOfRules(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("prometheus/smg-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	// The file's expressions are "expr: <one line>" or "expr: |" then an indented block.
	var exprs []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		_, v, ok := strings.Cut(lines[i], "expr: ")
		if !ok {
			continue
		}
		if v != "|" {
			exprs = append(exprs, v)
			continue
		}
		var block []string
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "          ") {
			i++
			block = append(block, strings.TrimSpace(lines[i]))
		}
		exprs = append(exprs, strings.Join(block, " "))
	}
	return exprs
}

// TestDashboardAndAlertsNameOnlyExportedMetrics: every series name the dashboard and the
// alert rules query is one a real gateway exports, so that no panel or alert is silently
// empty.
func TestDashboardAndAlertsNameOnlyExportedMetrics(t *testing.T) {
	dash, rules := exprsOfDashboard(t), exprsOfRules(t)
	if len(dash) < 10 || len(rules) < 5 {
		t.Fatalf("read %d dashboard and %d rule expressions: the files' shape changed", len(dash), len(rules))
	}
	exported := exportedNames(t)
	var missing []string
	for _, e := range append(dash, rules...) {
		names := metricName.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("expression names no gateway metric: %s", e)
		}
		for _, n := range names {
			if !exported[n] {
				missing = append(missing, n+" (in "+e+")")
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("not exported by the gateway: %s", m)
	}
}
