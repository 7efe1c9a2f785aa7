package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A spec example is a fenced code block's `smg` command line, continuation lines joined,
// shell variables ("$POD_NAME") given a value of their kind.
var (
	specFence    = regexp.MustCompile("(?s)```[^\n]*\n(.*?)```")
	specCommand  = regexp.MustCompile(`^(?:[A-Z_]+=\S+\s+)*smg(?:\s+launch)?((?:\s.*)?)$`)
	specShellVar = regexp.MustCompile(`"\$[A-Z_]+"`)
)

// TestSpecExampleCommandLines runs every `smg` command line of the spec's examples (with
// the spec beside the repository, ../shared/spec) through smg launch's parser and checks, as
// a user migrating from SMG would copy them: each is accepted, except the one with gRPC
// workers (least_load's example), which is refused with what to do instead
// (docs/differences.md, `grpc://` row). Elided lines ("...") are not command lines.
func TestSpecExampleCommandLines(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "spec", "*.md"))
	if len(files) == 0 {
		t.Log("no spec at ../shared/spec: its examples are not checked here")
		return
	}
	n := 0
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range specFence.FindAllStringSubmatch(string(doc), -1) {
			for _, line := range strings.Split(strings.ReplaceAll(block[1], "\\\n", " "), "\n") {
				m := specCommand.FindStringSubmatch(strings.TrimSpace(line))
				if m == nil || strings.Contains(line, "...") {
					continue
				}
				n++
				args := specShellVar.ReplaceAllStringFunc(m[1], func(v string) string {
					if strings.HasSuffix(v, `_IP"`) { // $POD_IP: the downward API's address
						return "10.0.0.21"
					}
					return "smg-0"
				})
				if _, err := parseLine(t, args); err != nil {
					t.Errorf("%s: smg%s: %v", filepath.Base(file), args, err)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d example command lines in the spec, want the 20 or more it has: the pattern no longer matches", n)
	}
	t.Logf("%d example command lines of the spec checked", n)
}
