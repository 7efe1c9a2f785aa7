package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// compatRow is one row of docs/compatibility.md's flag table.
type compatRow struct {
	flags  []string // without the leading "--"
	inSpec bool
	status string
	line   int
}

var backtickedFlag = regexp.MustCompile("`--([a-z0-9][a-z0-9-]*)`")

// compatFlagRows parses the "## Flags" table and the "Not gateway flags" sentence after it.
func compatFlagRows(t *testing.T, doc string) (rows []compatRow, notGateway []string) {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Flags\n")
	if !ok {
		t.Fatal("docs/compatibility.md has no \"## Flags\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for i, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "Not gateway flags") {
			rest := strings.Join(strings.Split(section, "\n")[i:], " ")
			for _, m := range backtickedFlag.FindAllStringSubmatch(rest, -1) {
				notGateway = append(notGateway, m[1])
			}
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.Contains(cells[1], "`--") {
			continue
		}
		r := compatRow{inSpec: strings.TrimSpace(cells[2]) == "yes", status: strings.TrimSpace(cells[3]), line: i}
		for _, m := range backtickedFlag.FindAllStringSubmatch(cells[1], -1) {
			r.flags = append(r.flags, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 50 {
		t.Fatalf("parsed only %d flag rows from docs/compatibility.md", len(rows))
	}
	return rows, notGateway
}

// TestCompatibilityFlagRows keeps docs/compatibility.md's flag table in step with the
// binary: every flag `smg launch` registers (aliases and negations included) has a row; a row is
// "missing" exactly when the binary lacks its flags; "SMG-Go only" rows are exactly the
// flags the spec does not name. With the spec beside the repository (../shared/spec), every
// flag it names has a row, or is listed as not a gateway flag.
func TestCompatibilityFlagRows(t *testing.T) {
	doc, err := os.ReadFile("../../docs/compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, notGateway := compatFlagRows(t, string(doc))
	var o options
	registered := map[string]bool{}
	for _, f := range newFlagSet(&o).Flags() {
		registered[f.Name] = true
		for _, a := range f.Aliases {
			registered[a] = true
		}
		for _, n := range f.Negations { // --no-remove-unhealthy-workers is accepted: not missing
			registered[n] = true
		}
	}
	documented := map[string]bool{}
	for _, r := range rows {
		if !slices.Contains([]string{"same", "different", "missing", "SMG-Go only"}, r.status) {
			t.Errorf("flag row %v: status %q is not same, different, missing or SMG-Go only", r.flags, r.status)
		}
		if (r.status == "SMG-Go only") == r.inSpec {
			t.Errorf("flag row %v: SMG-Go only rows, and only they, have — in the spec column", r.flags)
		}
		for _, f := range r.flags {
			documented[f] = true
			if registered[f] == (r.status == "missing") {
				t.Errorf("flag row --%s says %q, but smg launch registered=%v", f, r.status, registered[f])
			}
		}
	}
	for f := range registered {
		if !documented[f] {
			t.Errorf("smg launch registers --%s, which docs/compatibility.md's flag table does not list", f)
		}
	}

	specDir := filepath.Join("..", "..", "..", "shared", "spec")
	files, _ := filepath.Glob(filepath.Join(specDir, "*.md"))
	if len(files) == 0 {
		t.Logf("no spec at %s: the spec side of the table is not checked here", specDir)
		return
	}
	inSpec := map[string]bool{}
	mention := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(b), -1) {
			if !strings.HasSuffix(m[1], "-") { // "--least-load-*" names a family, not a flag
				inSpec[m[1]] = true
			}
		}
	}
	for f := range inSpec {
		if !slices.Contains(notGateway, f) && !slices.ContainsFunc(rows, func(r compatRow) bool { return r.inSpec && slices.Contains(r.flags, f) }) {
			t.Errorf("the spec names --%s, which has no spec row in docs/compatibility.md (nor is listed as not a gateway flag)", f)
		}
	}
	for _, r := range rows {
		if r.inSpec && !slices.ContainsFunc(r.flags, func(f string) bool { return inSpec[f] }) {
			t.Errorf("flag row %v says the spec names it, but the spec does not", r.flags)
		}
	}
}
