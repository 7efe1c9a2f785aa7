package deploy

import (
	"bytes"
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
