package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promtool builds (or finds cached) promtool with hack/promtool/build.sh, as `make tools`
// does, and returns its path.
func promtool(t *testing.T) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "hack", "promtool", "build.sh"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cannot build promtool (hack/promtool/build.sh; `make tools` runs it): %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1]
}

// TestAlertRulesPassPromtool: the rules file passes `promtool check rules` and its unit
// tests (prometheus/smg-alerts.test.yml) pass `promtool test rules`.
func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "prometheus/smg-alerts.yml"},
		{"test", "rules", "prometheus/smg-alerts.test.yml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestPromtoolRulesTestsCanFail: a rules unit test that expects the wrong alert fails, so the
// run above proves something.
func TestPromtoolRulesTestsCanFail(t *testing.T) {
	bin := promtool(t)
	b, err := os.ReadFile("prometheus/smg-alerts.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "lost peer gw2", "lost peer gw3", 1)
	if broken == string(b) {
		t.Fatal("the unit tests no longer hold the string this test changes")
	}
	dir := t.TempDir()
	rules, err := os.ReadFile("prometheus/smg-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "smg-alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "smg-alerts.test.yml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "test", "rules", filepath.Join(dir, "smg-alerts.test.yml")).CombinedOutput()
	if err == nil {
		t.Fatalf("promtool test rules passed a test that expects the wrong annotation:\n%s", out)
	}
}

// TestDashboardExpressionsParse: every panel query of the dashboard, with Grafana's variables
// replaced by values as Grafana would, is valid PromQL: each becomes a recording rule of a
// temporary rules file that `promtool check rules` parses.
func TestDashboardExpressionsParse(t *testing.T) {
	bin := promtool(t)
	grafanaVars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, e := range exprsOfDashboard(t) {
		if strings.HasPrefix(e, "label_values(") { // a Grafana templating function, not PromQL
			continue
		}
		n++
		q, err := json.Marshal(grafanaVars.Replace(e)) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "      - record: dashboard:panel%d\n        expr: %s\n", n, q)
	}
	if n < 10 {
		t.Fatalf("only %d dashboard expressions", n)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("a dashboard expression is not valid PromQL: %v\n%s\n%s", err, out, rules.String())
	}
	// The same check refuses a broken expression, so the run above proves something.
	broken := strings.Replace(rules.String(), "sum by (path, status_code)", "sum by (path, status_code", 1)
	if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", file).CombinedOutput(); err == nil {
		t.Errorf("promtool check rules accepted an unbalanced parenthesis:\n%s", out)
	}
}
