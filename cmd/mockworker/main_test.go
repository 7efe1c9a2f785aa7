package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

var readyLine = regexp.MustCompile(`^mockworker: worker (\d+) listening on (http://[0-9.]+:(\d+)) \(model (\S+), dialect (\w+)\)$`)

func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mockworker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "--port", "0", "--count", "3", "--model", "tiny", "--dialect", "vllm")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	sc := bufio.NewScanner(stdout)
	var urls []string
	for len(urls) < 3 && sc.Scan() {
		m := readyLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("unexpected line %q", sc.Text())
		}
		if m[1] != string(rune('0'+len(urls))) || m[4] != "tiny" || m[5] != "vllm" {
			t.Fatalf("line %q", sc.Text())
		}
		urls = append(urls, m[2])
	}
	if len(urls) != 3 {
		t.Fatalf("got %d ready lines (%v); stderr: %s", len(urls), sc.Err(), stderr.String())
	}
	seen := map[string]bool{}
	for _, u := range urls {
		resp, err := http.Post(u+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := resp.Header.Get("x-mock-worker-id")
		if resp.StatusCode != 200 || "http://"+id != u || !strings.Contains(string(body), `"model":"tiny"`) {
			t.Errorf("%s: %d worker %q body %s", u, resp.StatusCode, id, body)
		}
		seen[id] = true
	}
	if len(seen) != 3 {
		t.Errorf("workers %v, want 3 distinct", seen)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v; stderr: %s", err, stderr.String())
	}

	// A bad flag exits 2 and names the flag.
	out, err := exec.Command(bin, "--dialect", "tgi").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--dialect") {
		t.Errorf("bad flag: %v, output %q", err, out)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--port", "-1"}, "--port"},
		{[]string{"--port", "65535", "--count", "2"}, "--port"},
		{[]string{"--count", "0"}, "--count"},
		{[]string{"--dialect", "x"}, "--dialect"},
		{[]string{"--output-tokens", "0"}, "--output-tokens"},
		{[]string{"--token-interval-ms", "-5"}, "--token-interval-ms"},
		{[]string{"--server", "nginx"}, "--server"},
		{[]string{"--kv-tokens", "0"}, "--kv-tokens"},
		{[]string{"--max-running", "0"}, "--max-running"},
		{[]string{"--model", ""}, "--model"},
		{[]string{"--mode", "turbo"}, "--mode"},
		{[]string{"--block-size", "0"}, "--block-size"},
		{[]string{"--prefill-tps", "-1"}, "--prefill-tps"},
		{[]string{"--chunked-prefill-size", "0"}, "--chunked-prefill-size"},
		{[]string{"--decode-base-ms", "0"}, "--decode-base-ms"},
		{[]string{"--decode-per-req-ms", "-1"}, "--decode-per-req-ms"},
		{[]string{"--time-scale", "0"}, "--time-scale"},
		{[]string{"--count", "many"}, "-count"},
		{[]string{"--role", "both"}, "--role"},
		{[]string{"--bootstrap-port", "70000"}, "--bootstrap-port"},
		{[]string{"--kv-transfer-timeout-ms", "0"}, "--kv-transfer-timeout-ms"},
		{[]string{"--kv-engine-id", `a"b`}, "--kv-engine-id"},
		{[]string{"--decode-factors", "6:2"}, "-decode-factors"},
		{[]string{"--decode-factors", "1=2,1=3", "--count", "2"}, "-decode-factors"},
		{[]string{"--decode-factors", "5=2", "--count", "2"}, "--decode-factors"},
		{[]string{"--decode-factors", "0=0"}, "--decode-factors"},
		{[]string{"--protocol", "h2"}, "--protocol"},
		{[]string{"--tokenizer-path", "/nonexistent/model"}, "--tokenizer-path"},
		{[]string{"--protocol", "grpc", "--role", "encode"}, "--role"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"stray"}, "stray"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, stderr.String(), tc.flag)
		}
	}
}

func TestDecodeFactorsFlag(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--count", "8", "--mode", "engine", "--decode-factors", "6=2, 7=2.5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.DecodeFactors) != 2 || cfg.DecodeFactors[6] != 2 || cfg.DecodeFactors[7] != 2.5 {
		t.Fatalf("DecodeFactors = %v, want map[6:2 7:2.5]", cfg.DecodeFactors)
	}
	if cfg, _, err = parseFlags([]string{"--count", "8"}, io.Discard); err != nil || cfg.DecodeFactors != nil {
		t.Fatalf("without the flag: %v, %v; want no factors", cfg.DecodeFactors, err)
	}
}

func TestRunServesUntilStopped(t *testing.T) {
	stop := make(chan os.Signal)
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exit := make(chan int)
	go func() {
		exit <- run([]string{"--count", "2", "--worker-id-prefix", "w", "--token-interval-ms", "0.5"}, pw, &stderr, stop)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for i := range 2 {
		if !sc.Scan() {
			t.Fatalf("no ready line %d: %v", i, sc.Err())
		}
		m := readyLine.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("line %q", sc.Text())
		}
		resp, err := http.Get(m[2] + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("x-mock-worker-id"); got != "w"+m[1] {
			t.Errorf("worker id %q, want w%s", got, m[1])
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}

var pdReadyLine = regexp.MustCompile(`^mockworker: worker 0 listening on (http://[0-9.]+:\d+) \(model \S+, dialect sglang, role (\w+), bootstrap port (\d+)\)$`)

// startRun runs the command with args until the test ends and returns its first ready line's
// submatches (pdReadyLine).
func startRun(t *testing.T, args ...string) []string {
	t.Helper()
	stop := make(chan os.Signal)
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exit := make(chan int)
	go func() {
		exit <- run(args, pw, &stderr, stop)
		pw.Close()
	}()
	t.Cleanup(func() {
		stop <- syscall.SIGTERM
		if code := <-exit; code != 0 {
			t.Errorf("%v: exit %d, stderr %s", args, code, stderr.String())
		}
	})
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("%v: no ready line: %v", args, sc.Err())
	}
	m := pdReadyLine.FindStringSubmatch(sc.Text())
	if m == nil {
		t.Fatalf("line %q", sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return m
}

// TestRunPD: a prefill and a decode command serve one disaggregated request.
func TestRunPD(t *testing.T) {
	p := startRun(t, "--host", "127.0.0.11", "--role", "prefill", "--bootstrap-port", "0")
	if p[2] != "prefill" || p[3] == "0" {
		t.Fatalf("prefill line %q", p[0])
	}
	d := startRun(t, "--host", "127.0.0.12", "--role", "decode", "--bootstrap-port", p[3], "--kv-transfer-timeout-ms", "5000")
	if d[2] != "decode" || d[3] != p[3] {
		t.Fatalf("decode line %q", d[0])
	}
	body := `{"text":"hello","sampling_params":{"max_new_tokens":2},"bootstrap_host":"127.0.0.11","bootstrap_port":null,"bootstrap_room":42}`
	for _, u := range []string{p[1], d[1]} {
		resp, err := http.Post(u+"/generate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", u, resp.StatusCode, b)
		}
	}
}

// TestFlagErrorsAreOneLineWithTheFix: the gateway's error quality, not the flag package's
// error followed by the whole usage.
func TestFlagErrorsAreOneLineWithTheFix(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dialekt", "vllm"}, "mockworker: unknown flag --dialekt; did you mean --dialect? (run 'mockworker --help' to list flags)"},
		{[]string{"--count", "many"}, `mockworker: invalid value "many" for --count: give an integer such as 1`},
		{[]string{"--token-interval-ms", "5ms"}, `mockworker: invalid value "5ms" for --token-interval-ms: give a number such as 0`},
		{[]string{"--port"}, "mockworker: flag --port needs a value: an integer such as 0"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and the one line %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
