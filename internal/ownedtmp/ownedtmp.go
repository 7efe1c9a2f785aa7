package ownedtmp

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Make creates a new directory in os.TempDir() named prefix, this process's PID, "-" and a
// random suffix, and returns its path.
func Make(prefix string) (string, error) {
	return os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
}

// Orphans returns the directories Make created with prefix whose owner no longer runs. A
// directory whose name carries no PID (made otherwise) is not listed.
func Orphans(prefix string) []string {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	var out []string
	for _, p := range paths {
		pid, ok := ownerPID(filepath.Base(p), prefix)
		if ok && !running(pid) {
			out = append(out, p)
		}
	}
	return out
}

// ownerPID reads the PID Make wrote into a directory's name.
func ownerPID(name, prefix string) (int, bool) {
	digits, _, found := strings.Cut(strings.TrimPrefix(name, prefix), "-")
	if !found {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}

// running reports whether a process with this PID exists (one of another user counts).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
