package ownedtmp

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestOrphansListsOnlyDirectoriesOfDeadOwners(t *testing.T) {
	prefix := "ownedtmp-test-" + strconv.Itoa(os.Getpid()) + "-"

	mine, err := Make(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(mine) })

	// A process that has exited: its PID names no running process.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(os.TempDir(), prefix+strconv.Itoa(dead.Process.Pid)+"-x")
	// A directory whose name carries no PID.
	foreign := filepath.Join(os.TempDir(), prefix+"nopid")
	for _, d := range []string{orphan, foreign} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}

	got := Orphans(prefix)
	if !slices.Equal(got, []string{orphan}) {
		t.Fatalf("Orphans(%q) = %q, want only %q (not this process's %q, not %q)", prefix, got, orphan, mine, foreign)
	}
}

func TestOwnerPID(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"p-123-abc", 123, true},
		{"p-123-", 123, true},
		{"p-abc-123", 0, false},
		{"p-123", 0, false},
		{"p--1-x", 0, false},
		{"p-0-x", 0, false},
	} {
		pid, ok := ownerPID(c.name, "p-")
		if pid != c.pid && c.ok || ok != c.ok {
			t.Errorf("ownerPID(%q) = %d, %v; want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
}
