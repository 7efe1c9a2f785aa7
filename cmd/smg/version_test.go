package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/e2e"
)

// versionLine is `smg --version`'s output: module version, a 40-hex VCS commit (buildStamped
// builds inside the repository with VCS stamping, as `make build` does), the Go version.
var versionLine = regexp.MustCompile(`^smg (\S+) \(commit ([0-9a-f]{40}(?:-dirty)?), (go\S+)\)\n$`)

// TestVersionFlagAndCommandOfTheRealBinary runs the built smg: --version and `smg version`
// print the same line, from the binary's build information, and exit 0 without serving.
func TestVersionFlagAndCommandOfTheRealBinary(t *testing.T) {
	smg := buildStamped(t)
	var lines []string
	for _, args := range [][]string{{"--version"}, {"version"}, {"launch", "--version"}, {"launch", "--policy", "round_robin", "--version"}} {
		out, err := exec.Command(smg, args...).Output()
		if err != nil {
			t.Fatalf("smg %s: %v", strings.Join(args, " "), err)
		}
		m := versionLine.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("smg %s printed %q, want %s", strings.Join(args, " "), out, versionLine)
		}
		if m[3] != runtime.Version() {
			t.Errorf("smg %s: Go version %q, want the toolchain's %q", strings.Join(args, " "), m[3], runtime.Version())
		}
		lines = append(lines, string(out))
	}
	for _, l := range lines[1:] {
		if l != lines[0] {
			t.Errorf("version outputs differ: %q vs %q", lines[0], l)
		}
	}
	help, err := exec.Command(smg, "--help").Output()
	if err != nil || !strings.Contains(string(help), "--version") {
		t.Errorf("smg --help does not list --version (err %v)", err)
	}
}

// TestBuildInfoMetricOfTheRealBinary scrapes a running gateway: smg_build_info is 1 with the
// labels --version prints.
func TestBuildInfoMetricOfTheRealBinary(t *testing.T) {
	b := e2e.Build(t)
	out, err := exec.Command(b.SMG, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The shared test binary may be built without VCS stamping: its commit is then "unknown".
	m := regexp.MustCompile(`^smg (\S+) \(commit (\S+), (go\S+)\)\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("smg --version printed %q", out)
	}
	mocks := e2e.StartMocks(t, 1)
	g := e2e.StartGateway(t, "--worker-urls", mocks.URLs[0])
	series := "smg_build_info{version=" + strconv.Quote(m[1]) + ",commit=" + strconv.Quote(m[2]) + ",goversion=" + strconv.Quote(m[3]) + "}"
	v, ok := e2e.Metric(t, g.MetricsURL, series)
	if !ok || v != 1 {
		body := e2e.MustDo(t, "GET", g.MetricsURL, "", nil).Body
		t.Fatalf("want %s 1, got %v (found %v); build_info lines: %q", series, v, ok, grepLines(body, "smg_build_info"))
	}
}

func grepLines(body, substr string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestReadBuildInfoNeverBlank: the metric's labels are never empty, even in a test binary
// that has no module version.
func TestReadBuildInfoNeverBlank(t *testing.T) {
	b := readBuildInfo()
	if b.Version == "" || b.Commit == "" || b.GoVersion != runtime.Version() {
		t.Fatalf("readBuildInfo() = %+v", b)
	}
}

// buildStamped builds cmd/smg with -buildvcs=true (GOFLAGS may turn stamping off) into a
// temporary directory.
func buildStamped(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "smg")
	cmd := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
