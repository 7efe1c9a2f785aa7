package testutil

import (
	"log/slog"
	"strings"
	"testing"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Eventually(t, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

func TestNewRandIsReproducible(t *testing.T) {
	a, b, c := NewRand(7), NewRand(7), NewRand(8)
	same, differ := true, false
	for range 20 {
		x, y, z := a.IntN(1000), b.IntN(1000), c.IntN(1000)
		same = same && x == y
		differ = differ || x != z
	}
	if !same || !differ {
		t.Fatalf("same seed same sequence: %v; other seed another: %v", same, differ)
	}
}

func TestLoggerWritesWhatTheLevelLets(t *testing.T) {
	log, buf := Logger(slog.LevelInfo)
	log.Debug("hidden")
	log.Info("shown", "k", 1)
	if got := Lines(buf, "msg="); len(got) != 1 || !strings.Contains(got[0], "level=INFO msg=shown k=1") {
		t.Fatalf("lines = %q", got)
	}
	if len(Lines(buf, "hidden")) != 0 {
		t.Fatal("a debug line passed an info logger")
	}
	Quiet.Error("dropped")
}
