package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// logClaim matches a claim of docs/differences.md that the gateway logs a line: "logs `X`"
// or "logged at warn `X`".
var logClaim = regexp.MustCompile("(?i)\\blog(?:s|ged)?(?:\\s+at\\s+\\w+)?\\s+`([^`]+)`")

// TestDifferencesLogClaimsAreAsserted keeps docs/differences.md true: every line it says the
// gateway logs is asserted, literally, by some test of the repository.
func TestDifferencesLogClaimsAreAsserted(t *testing.T) {
	doc, err := os.ReadFile("../../docs/differences.md")
	if err != nil {
		t.Fatal(err)
	}
	claims := logClaim.FindAllStringSubmatch(string(doc), -1)
	if len(claims) == 0 {
		t.Fatal("no log claim found: the pattern no longer matches the document")
	}
	var tests strings.Builder
	self, _ := filepath.Abs("docs_test.go")
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if abs, _ := filepath.Abs(path); d.IsDir() || !strings.HasSuffix(path, "_test.go") || abs == self {
			return nil
		}
		b, err := os.ReadFile(path)
		tests.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if !strings.Contains(tests.String(), c[1]) {
			t.Errorf("docs/differences.md says the gateway logs %q, and no test asserts it: assert it where the line is logged", c[1])
		}
	}
	t.Logf("%d log claims, each asserted by a test", len(claims))
}
