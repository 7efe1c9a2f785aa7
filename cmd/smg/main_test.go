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
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestHelpListsFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"launch", "--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "--worker-urls") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}
