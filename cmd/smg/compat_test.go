package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// parseLine parses and validates a command line the way run does.
func parseLine(t *testing.T, line string) (options, error) {
	t.Helper()
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(strings.Fields(line)); err != nil {
		return o, err
	}
	return o, o.validate(fs)
}

// TestSpecFlagsAccepted: the spec's flags that used to be unknown parse, with the effect
// README and docs/differences.md describe.
func TestSpecFlagsAccepted(t *testing.T) {
	o, err := parseLine(t, "--model-path meta-llama/Llama-3.1-8B-Instruct --max-buffered-request-bytes 0 --no-remove-unhealthy-workers --cache-index hash --cache-boundaries 2048,8192 --cache-ttl-secs 60 --worker-urls http://w:8000")
	if err != nil {
		t.Fatal(err)
	}
	if ca := o.policies.CacheAware; o.modelPath != "meta-llama/Llama-3.1-8B-Instruct" || o.gateway.MaxBufferedBody != 0 || o.health.RemoveUnhealthy || o.enableIGW ||
		ca.CacheIndex != "hash" || len(ca.CacheBoundaries) != 2 || ca.CacheTTL.Seconds() != 60 {
		t.Fatalf("%+v", o)
	}
	// --service-discovery turns on IGW mode, and --enable-igw lifts the two-worker minimum of
	// a power_of_two PD leg, as the spec says IGW mode does.
	if o, err = parseLine(t, "--service-discovery --selector app=x"); err != nil || !o.enableIGW {
		t.Fatalf("discovery: igw %v err %v", o.enableIGW, err)
	}
	pd := "--pd-disaggregation --prefill http://p:1 --decode http://d:1 --decode-policy power_of_two"
	if _, err := parseLine(t, pd); err == nil || !strings.Contains(err.Error(), "needs at least two --decode workers") {
		t.Fatalf("without IGW: %v", err)
	}
	if _, err := parseLine(t, pd+" --enable-igw"); err != nil {
		t.Fatalf("with --enable-igw: %v", err)
	}
	// With discovery failed workers are removed unless the Python launcher's negation says not.
	for _, tc := range []struct {
		line   string
		remove bool
	}{
		{"--service-discovery --selector app=x", true},
		{"--service-discovery --selector app=x --no-remove-unhealthy-workers", false},
		{"--service-discovery --selector app=x --remove-unhealthy-workers=false", false},
	} {
		o, err := parseLine(t, tc.line)
		if err != nil || o.health.RemoveUnhealthy != tc.remove {
			t.Errorf("%s: remove %v, want %v (err %v)", tc.line, o.health.RemoveUnhealthy, tc.remove, err)
		}
	}
}

// TestSpecFormsRefusedWithWhatToRun: the spec's forms SMG-Go does not run exit 2 with a
// message that says what to run instead.
func TestSpecFormsRefusedWithWhatToRun(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"serve --model-path m --router-policy round_robin", "SMG-Go launches no engines. Start the engines yourself"},
		{"serve --help", "run 'smg launch --worker-urls http://HOST:8000 ...'"},
		{"frobnicate", `unknown command "frobnicate": run 'smg launch [flags]'`},
		{"launch --router-policy round_robin", "unknown flag --router-policy: the --router- prefix is smg serve's spelling, which SMG-Go does not run; smg launch takes --policy"},
		{"--router-enable-mesh", "smg launch takes --enable-mesh"},
		{"--data-parallel-size 2", "--data-parallel-size: this is smg serve's flag"},
		{"--cache-index hash", "--cache-index hash needs --cache-boundaries"},
		{"--cache-index lsh", `invalid value "lsh" for --cache-index`},
		{"--max-buffered-request-bytes -1", "--max-buffered-request-bytes -1: must be 0 or more"},
	} {
		var out, errb bytes.Buffer
		if code := run(strings.Fields(tc.args), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out.String(), errb.String(), tc.want)
		}
	}
}

// TestHelpIsReadable: every value has a name that says what it is (no bare V, no generic
// VALUE or TEXT), a default is printed once, and
// long names never push a description out of its column.
func TestHelpIsReadable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"launch", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(out.String(), "\n")
	for i, line := range lines {
		if strings.Contains(line, " V ") || strings.Contains(line, " V...") {
			t.Errorf("bare V: %q", line)
		}
		if strings.HasPrefix(line, "  --") && (strings.Contains(line, " VALUE") || strings.Contains(line, " TEXT ")) {
			t.Errorf("a value named only by its kind (VALUE, TEXT), not by what it is: %q", line)
		}
		if strings.Count(line, "(default") > 1 {
			t.Errorf("default printed twice: %q", line)
		}
		const col = 2 + 40 + 1 // indent, names column, space
		if strings.HasPrefix(line, "  --") && len(line) > col && line[col-1] != ' ' &&
			(i+1 == len(lines) || !strings.HasPrefix(lines[i+1], strings.Repeat(" ", col))) {
			t.Errorf("names spill into the description column: %q", line)
		}
	}
	for _, want := range []string{"--port PORT ", "--worker-urls, --worker-url URL... ", "--mesh-server-name NAME ", "(default Mesh_ and 4 random alphanumerics)",
		"--remove-unhealthy-workers, --worker-auto-recovery, --no-remove-unhealthy-workers\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestCompatNotesAreLogged: what an accepted flag does not do is said at start-up.
func TestCompatNotesAreLogged(t *testing.T) {
	o, err := parseLine(t, "--router-selector app=smg --enable-mesh --mesh-advertise-host 127.0.0.1 --model-path m")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logCompatNotes(&o, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, want := range []string{
		`level=WARN msg="Router selector configured but service discovery is not enabled"`,
		`msg="--model-path is not a local directory and SMG-Go downloads nothing from a model hub: each gRPC engine's tokenizer is fetched from the engine (GetTokenizer); HTTP workers are routed on the request text" model_path=m`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	// With discovery the warning is k8s.Start's to give (or not): nothing here.
	o, _ = parseLine(t, "--service-discovery --selector app=w --router-selector app=smg")
	logs.Reset()
	logCompatNotes(&o, slog.New(slog.NewTextHandler(&logs, nil)))
	if logs.Len() != 0 {
		t.Fatalf("logged with discovery on: %s", logs.String())
	}
}
