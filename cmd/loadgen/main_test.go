package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/smg-go/smg/loadgen"
	"github.com/smg-go/smg/loadgen/loadgentest"
	"github.com/valyala/fasthttp"
)

func startFake(t *testing.T, opts loadgentest.Options) *loadgentest.Server {
	t.Helper()
	srv, err := loadgentest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// buildBinary compiles cmd/loadgen, so the end-to-end test runs the real program.
func buildBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the end-to-end test builds cmd/loadgen and needs the go tool on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "loadgen")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestBinaryRunsAndWritesResults(t *testing.T) {
	srv := startFake(t, loadgentest.Options{WorkerID: "mock-1", FailEvery: 10})
	bin := buildBinary(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "result.json"), filepath.Join(dir, "report.html")
	cmd := exec.Command(bin, "run", "--base-url", srv.BaseURL, "--model", "m", "--workload", "random",
		"--random-input-len", "64", "--random-output-len", "8", "--random-range-ratio", "1",
		"--num-requests", "40", "--max-concurrency", "4", "--seed", "3",
		"--output", jsonPath, "--html", htmlPath, "--progress", "off", "--timeout", "30s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "Serving Benchmark Result") {
		t.Errorf("summary missing from stdout:\n%s", stdout.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Completed         int64            `json:"completed"`
		Failed            int64            `json:"failed"`
		StatusCounts      map[string]int64 `json:"status_counts"`
		Workers           map[string]int64 `json:"workers"`
		TotalInputTokens  int64            `json:"total_input_tokens"`
		TotalOutputTokens int64            `json:"total_output_tokens"`
		RequestThroughput float64          `json:"request_throughput"`
		TTFT              loadgen.Summary  `json:"ttft_ms"`
		ITL               loadgen.Summary  `json:"itl_ms"`
		Config            struct {
			Seed int64 `json:"seed"`
		} `json:"config"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Completed != 36 || res.Failed != 4 || res.StatusCounts["200"] != 36 || res.StatusCounts["503"] != 4 || res.Workers["mock-1"] != 40 {
		t.Fatalf("counts: completed %d failed %d status %v workers %v", res.Completed, res.Failed, res.StatusCounts, res.Workers)
	}
	if res.TotalInputTokens != 36*64 || res.TotalOutputTokens != 36*8 || res.ITL.Count != 36*7 || res.TTFT.Count != 36 || res.RequestThroughput <= 0 || res.Config.Seed != 3 {
		t.Fatalf("tokens in %d out %d, itl %d ttft %d, throughput %v", res.TotalInputTokens, res.TotalOutputTokens, res.ITL.Count, res.TTFT.Count, res.RequestThroughput)
	}
	if html, err := os.ReadFile(htmlPath); err != nil || !bytes.Contains(html, []byte("<svg")) {
		t.Fatalf("HTML report: %v", err)
	}

	// A saved result renders again.
	again := filepath.Join(dir, "again.html")
	if out, err := exec.Command(bin, "report", jsonPath, "--html", again).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("Successful requests:                    36")) {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if html, err := os.ReadFile(again); err != nil || !bytes.Contains(html, []byte("<svg")) {
		t.Fatalf("re-rendered HTML report: %v", err)
	}

	// The result compares clean against itself; the binary's exit status says so.
	cmp := exec.Command(bin, "compare", jsonPath, jsonPath, "--max-regression", "1%")
	if out, err := cmp.CombinedOutput(); err != nil {
		t.Fatalf("compare with itself: %v\n%s", err, out)
	}
}

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	cases := [][]string{
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--request-rate", "fast"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--workload", "sharegpt"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--max-concurrency", "-1"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--progress", "sometimes"},
		{"--model", "m"},
		{"run", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "stray"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--header", "no-colon"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--header", "bad name: x"},
	}
	wants := []string{"request-rate", "workload", "--max-concurrency", "--progress", "--base-url", "stray", "header", "--header"}
	for i, args := range cases {
		var stdout, stderr bytes.Buffer
		if code := dispatch(args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), wants[i]) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", args, code, stderr.String(), wants[i])
		}
	}
}

func writeResult(t *testing.T, r *loadgen.Result) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCompareExitStatus(t *testing.T) {
	base := &loadgen.Result{SchemaVersion: loadgen.SchemaVersion, Completed: 10, RequestThroughput: 100, TTFT: loadgen.Summary{Count: 10, Mean: 5, Median: 5, P90: 6, P99: 7}}
	same := *base
	slower := *base
	slower.TTFT.P99 = 9
	basePath, samePath, slowerPath := writeResult(t, base), writeResult(t, &same), writeResult(t, &slower)

	var stdout, stderr bytes.Buffer
	if code := dispatch([]string{"compare", basePath, samePath, "--max-regression", "5%"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("equal results: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := dispatch([]string{"compare", "--max-regression", "5%", basePath, slowerPath}, &stdout, &stderr); code != exitFail || !strings.Contains(stdout.String(), "\nREGRESSION ttft_ms.p99 regressed by 28.6%") {
		t.Fatalf("regression: exit %d, output %q; want exit 1 naming ttft_ms.p99", code, stdout.String())
	}
	// The side-by-side table comes first: every metric, the regressed one marked.
	table, regressions, _ := strings.Cut(stdout.String(), "\n\n")
	if !strings.HasPrefix(table, "metric ") || !strings.Contains(table, "request_throughput") || !strings.Contains(regressions, "REGRESSION") {
		t.Fatalf("want the metric table, a blank line, then the regressions; got\n%s", stdout.String())
	}
	if row := regexp.MustCompile(`(?m)^ttft_ms\.p99 .*$`).FindString(table); strings.Join(strings.Fields(row), " ") != "ttft_ms.p99 7 9 +28.6% REGRESSION" {
		t.Fatalf("ttft_ms.p99 row %q in\n%s", row, table)
	}
	stdout.Reset()
	if code := dispatch([]string{"compare", basePath, slowerPath, "--max-regression", "50%"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("regression within a 50%% limit: exit %d %s", code, stdout.String())
	}
	stderr.Reset()
	if code := dispatch([]string{"compare", basePath, slowerPath, "--max-regression", "lots"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--max-regression") {
		t.Fatalf("bad limit: exit %d %q", code, stderr.String())
	}
	if code := dispatch([]string{"compare", basePath}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("one file: exit %d", code)
	}
	if code := dispatch([]string{"compare", basePath, filepath.Join(t.TempDir(), "missing.json")}, &stdout, &stderr); code != exitFail {
		t.Fatalf("missing file: exit %d", code)
	}
}

func TestRunExitsOneWhenNothingSucceeds(t *testing.T) {
	srv := startFake(t, loadgentest.Options{FailEvery: 1})
	var stdout, stderr bytes.Buffer
	code := dispatch([]string{"--base-url", srv.BaseURL, "--model", "m", "--workload", "raw", "--num-requests", "3", "--progress", "off", "--timeout", "30s"}, &stdout, &stderr)
	if code != exitFail || !strings.Contains(stderr.String(), "no request succeeded") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestAPIKeyFromEnvironmentIsSentButNeverPrinted(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	var auth atomic.Value
	srv := startFake(t, loadgentest.Options{Record: func(req *fasthttp.Request) {
		auth.Store(string(req.Header.Peek(fasthttp.HeaderAuthorization)))
	}})
	var stdout, stderr bytes.Buffer
	if code := dispatch([]string{"--base-url", srv.BaseURL, "--model", "m", "--workload", "raw", "--num-requests", "2", "--progress", "off", "--timeout", "30s"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if auth.Load() != "Bearer sk-from-env" {
		t.Fatalf("authorization %v", auth.Load())
	}
	stderr.Reset()
	dispatch([]string{"run", "-h"}, &stdout, &stderr)
	if strings.Contains(stdout.String()+stderr.String(), "sk-from-env") || !strings.Contains(stderr.String(), "-api-key") {
		t.Fatalf("help output leaks the key or lacks the flag:\n%s", stderr.String())
	}
}

// TestFlagErrorsAreOneLineWithTheFix: a bad command line gets one line that names the flag
// and says how to fix it (did-you-mean, a valid value), exit 2, and no usage dump.
func TestFlagErrorsAreOneLineWithTheFix(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--duraton", "5s"}, "loadgen: unknown flag --duraton; did you mean --duration? (run 'loadgen run --help' to list flags)"},
		{[]string{"--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--duration", "5"}, `loadgen: invalid value "5" for --duration: give a duration with its unit, such as 5s, 1m30s or 500ms`},
		{[]string{"run", "--model", "m", "--num-requests", "ten"}, `loadgen: invalid value "ten" for --num-requests: give an integer such as 0`},
		{[]string{"compare", "a.json", "b.json", "--max-regresion", "5%"}, "loadgen compare: unknown flag --max-regresion; did you mean --max-regression?"},
		{[]string{"report", "r.json", "--htm", "x.html"}, "loadgen report: unknown flag --htm; did you mean --html?"},
		{[]string{"fakeserver", "--token-delay", "1"}, `loadgen fakeserver: invalid value "1" for --token-delay: give a duration`},
		{[]string{"frobnicate"}, `loadgen: unexpected argument "frobnicate": loadgen's commands are run, compare, report and fakeserver, and run takes flags only (run 'loadgen --help')`},
		{[]string{"base.json", "new.json"}, `loadgen: unexpected arguments "base.json" "new.json": to compare two results, run 'loadgen compare base.json new.json'`},
		{[]string{"--model", "m", "r.json"}, `loadgen: unexpected argument "r.json": to summarize a result, run 'loadgen report r.json'`},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch(tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and the one line %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
