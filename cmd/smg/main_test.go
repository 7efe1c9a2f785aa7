package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestREADMEFlagTableIsCurrent keeps the README's flag table generated from the code.
func TestREADMEFlagTableIsCurrent(t *testing.T) {
	var o options
	table := newFlagSet(&o).Markdown()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), table) {
		t.Fatalf("README.md's flag table is stale; replace it with the output of `go run ./cmd/smg --help-markdown`:\n%s", table)
	}
}

func TestRunRejectsBadFlagsWithExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"launch", "--port", "x"},
		{"--policy", "nope"},
		{"--worker-urls", "ftp://w"},
		{"--prometheus-port", "70000"},
		{"--max-connections-per-worker", "0"},
		{"--port", "30123", "--worker-urls", "http://localhost:30123"},
		{"--data-plane", "fasthttp"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestDataPlaneFlagTakesOnlyTheEventLoops: --data-plane evloop, which scripts of earlier
// versions pass, still parses; fasthttp, whose generation path was removed, is refused with
// the reason, and any other value too.
func TestDataPlaneFlagTakesOnlyTheEventLoops(t *testing.T) {
	if _, err := parseValid(t, "--data-plane", "evloop"); err != nil {
		t.Fatalf("--data-plane evloop: %v", err)
	}
	for value, want := range map[string]string{"fasthttp": "fasthttp data plane was removed", "epoll": "not a data plane"} {
		if _, err := parse(t, "--data-plane", value); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "give evloop") {
			t.Errorf("--data-plane %s: %v, want an error saying %q and naming evloop", value, err, want)
		}
	}
}

// TestHelpListsFlags: every way of asking for help (--help, -h, "smg help") prints the
// launch flags and exits 0.
func TestHelpListsFlags(t *testing.T) {
	for _, args := range [][]string{{"launch", "--help"}, {"--help"}, {"-h"}, {"help"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "--worker-urls") || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %.200q", args, code, errb.String(), out.String())
		}
	}
}

func TestPDCommandLines(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--prefill http://p:1 9001", "--prefill needs --pd-disaggregation"},
		{"--decode-policy random", "--decode-policy needs --pd-disaggregation"},
		{"--pd-disaggregation --prefill http://p:1 --decode http://d:1 --decode-policy bucket", "--decode-policy bucket: bucket routes only the prefill leg"},
		{"--pd-disaggregation --policy bucket --prefill http://p:1 --decode http://d:1", "set --decode-policy"},
		{"--pd-disaggregation --prefill http://p:1 --decode http://d:1 --prefill-policy passthrough", "--prefill-policy passthrough"},
		{"--pd-disaggregation --prefill http://p:1 --decode http://d:1 --decode-policy power_of_two", "--decode-policy power_of_two needs at least two --decode workers (got 1)"},
		{"--pd-disaggregation --prefill http://p:1 http://q:1 --decode http://d:1", `bootstrap port "http://q:1" is not a port`},
		{"--pd-disaggregation --prefill http://p:1 70000 --decode http://d:1", "not a port in 1-65535 or none"},
		{"--pd-disaggregation --worker-urls http://w:1", "--worker-urls cannot be used with --pd-disaggregation"},
		{"--pd-disaggregation --prefill http://p:1 --decode http://d:1 --kv-connector LMCache", "--kv-connector \"LMCache\""},
		{"--pd-disaggregation --service-discovery --selector app=x", "needs --prefill-selector and/or --decode-selector"},
	} {
		var out, errb bytes.Buffer
		if code := run(strings.Fields(tc.args), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want it to contain %q", tc.args, code, errb.String(), tc.want)
		}
	}
	// The spec's command line parses, with bootstrap ports kept per worker.
	var o options
	fs := newFlagSet(&o)
	args := "--pd-disaggregation --prefill http://p1:8000 9001 --prefill http://p2:8000 none --decode http://d1:8000 --decode http://d2:8000 --prefill-policy bucket --decode-policy power_of_two"
	if err := fs.Parse(strings.Fields(args)); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(fs); err != nil {
		t.Fatal(err)
	}
	specs := o.staticSpecs()
	if len(specs) != 4 || specs[0].Labels["sglang.ai/bootstrap-port"] != "9001" || specs[1].Labels != nil ||
		specs[2].WorkerType != "decode" || o.pd.legs.Prefill != "bucket" || o.pd.legs.Decode != "power_of_two" || o.pd.legs.Encode != "" {
		t.Fatalf("specs %+v legs %+v", specs, o.pd.legs)
	}
}
