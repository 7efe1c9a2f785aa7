package main

import (
	"io"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/cli"
)

// FuzzParseRun feeds arbitrary command lines (NUL-separated arguments) to the run command's
// parser: it must not panic, must answer 0 or 2, and whatever it accepts must be valid.
func FuzzParseRun(f *testing.F) {
	for _, seed := range []string{
		"--base-url\x00http://127.0.0.1:1/v1\x00--model\x00m",
		"--base-url=http://h:1/v1\x00--model=m\x00--workload=multi-turn\x00--mt-users=2\x00--max-concurrency=3",
		"--request-rate\x00inf\x00--arrival\x00constant",
		"--header\x00X-A: b\x00--header\x00nocolon\x00--session-header\x00X-SMG-Routing-Key",
		"--random-distribution\x00exponential\x00--random-range-ratio\x002",
		"-h",
		"stray\x00--model",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		cfg, _, code, done := parseRun(args, io.Discard)
		if done && code != exitOK && code != exitUsage {
			t.Fatalf("%q: exit %d", args, code)
		}
		if !done {
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%q accepted but invalid: %v", args, err)
			}
		}
	})
}

// FuzzParseInterleaved checks that positional arguments survive flags anywhere.
func FuzzParseInterleaved(f *testing.F) {
	f.Add("a.json\x00--max-regression\x005%\x00b.json")
	f.Add("--max-regression=1%\x00a\x00b\x00c")
	f.Add("--\x00-x")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		var stderr strings.Builder
		fs := newCompareFlags(&stderr)
		files, err := cli.ParseStd(fs.cmd.flags, args)
		if err != nil {
			return
		}
		for _, f := range files {
			if !contains(args, f) {
				t.Fatalf("%q: positional %q was not an argument", args, f)
			}
		}
	})
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
