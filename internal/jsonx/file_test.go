package jsonx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFileNamesTheFileInItsErrors(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"n":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"n":`), 0o600); err != nil {
		t.Fatal(err)
	}
	type doc struct{ N int }
	if v, err := ReadFile[doc](good, "result"); err != nil || v.N != 7 {
		t.Fatalf("ReadFile(good) = %+v, %v; want {N:7}", v, err)
	}
	if _, err := ReadFile[doc](bad, "result"); err == nil || !strings.HasPrefix(err.Error(), "cannot parse result "+bad+": ") {
		t.Errorf("ReadFile(bad) error %v, want one naming the result and its path", err)
	}
	if _, err := ReadFile[doc](filepath.Join(dir, "none.json"), "baseline"); err == nil || !strings.HasPrefix(err.Error(), "cannot read baseline: ") {
		t.Errorf("ReadFile(missing) error %v, want one naming the baseline", err)
	}
}
