package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// placeholder cuts a documented log line where it varies: <addr>, '…', N.
var placeholder = regexp.MustCompile(`<[^>]*>|'…'|…|\b[NMD]\b`)

// TestCompatibilitySameRowsAreAsserted keeps docs/compatibility.md's "same" rows true for log
// lines and metrics, as TestDifferencesLogClaimsAreAsserted keeps differences.md's: every log
// line and metric a "same" row names is asserted by some test of the repository (a log line's
// longest fixed part, a metric's name), so that a renamed line or series fails a test here
// and not a user's alert.
func TestCompatibilitySameRowsAreAsserted(t *testing.T) {
	doc, err := os.ReadFile("../../docs/compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	tests := allTestSources(t)
	checked := 0
	for _, section := range []string{"## Log lines", "## Metrics"} {
		rows := sameRows(t, string(doc), section)
		if len(rows) == 0 {
			t.Fatalf("no \"same\" row under %q: the table's layout changed", section)
		}
		for _, item := range rows {
			item = strings.ReplaceAll(item, `\|`, "|") // a table cell escapes |
			want := item
			if section == "## Metrics" {
				want, _, _ = strings.Cut(item, "{")
			} else {
				want = longestFixedPart(item)
			}
			if len(want) < 8 {
				t.Errorf("%s %q: no fixed part long enough to look for", section, item)
				continue
			}
			checked++
			if !strings.Contains(tests, want) {
				t.Errorf("docs/compatibility.md says %q is the spec's (same), and no test asserts %q: assert it where it is emitted", item, want)
			}
		}
	}
	t.Logf("%d log lines and metrics of \"same\" rows, each asserted by a test", checked)
}

// sameRows returns the backquoted items of the first column of the rows marked same in the
// table under heading.
func sameRows(t *testing.T, doc, heading string) []string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/compatibility.md has no %q section", heading)
	}
	body := doc[i+len(heading)+2:]
	if j := strings.Index(body, "\n## "); j >= 0 {
		body = body[:j]
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	var items []string
	for _, line := range strings.Split(body, "\n") {
		cols := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| ") || len(cols) < 3 || strings.TrimSpace(cols[2]) != "same" {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(cols[0], -1) {
			items = append(items, m[1])
		}
	}
	return items
}

// longestFixedPart is the longest piece of a documented log line between its placeholders.
func longestFixedPart(line string) string {
	best := ""
	for _, p := range placeholder.Split(line, -1) {
		if p = strings.TrimSpace(p); len(p) > len(best) {
			best = p
		}
	}
	return best
}

// allTestSources concatenates every _test.go file of the repository but this one.
func allTestSources(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	self, _ := filepath.Abs("compatsame_test.go")
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if abs, _ := filepath.Abs(path); d.IsDir() || !strings.HasSuffix(path, "_test.go") || abs == self {
			return nil
		}
		src, err := os.ReadFile(path)
		b.Write(src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
