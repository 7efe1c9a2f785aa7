package testutil

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/syncbuf"
)

// Patience bounds Eventually. It only keeps a broken test from hanging: no test asserts a
// duration (docs/architecture.md), so it is generous enough for real processes on a loaded machine.
const Patience = 60 * time.Second

// Eventually polls cond until it holds, and fails the test when it still does not after
// Patience. It polls every millisecond at first, backing off to every 20 ms, so a cheap
// condition settles fast and an expensive one (an HTTP scrape) is not hammered.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Patience, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// NewRand returns a random source seeded with seed: the same seed, the same sequence. It
// satisfies policy.Rand.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Logger returns a text logger at level that writes into the returned buffer.
func Logger(level slog.Level) (*slog.Logger, *syncbuf.Buffer) {
	b := &syncbuf.Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level})), b
}

// Quiet is a logger that drops everything.
var Quiet = slog.New(slog.DiscardHandler)

// Lines returns the lines of b that contain substr.
func Lines(b *syncbuf.Buffer, substr string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// Percentiles summarises measured durations for a benchmark's report.
type Percentiles struct {
	N             int
	P50, P99, Max time.Duration
}

// PercentilesOf sorts d and returns its percentiles (the zero value for no durations).
func PercentilesOf(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Percentiles{N: len(d), P50: at(0.50), P99: at(0.99), Max: d[len(d)-1]}
}

func (p Percentiles) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %v p99 %v max %v over %d", r(p.P50), r(p.P99), r(p.Max), p.N)
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages (/proc/loadavg), to print
// beside a measurement; "unknown" where the file cannot be read.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
