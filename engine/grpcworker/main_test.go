package grpcworker

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: connections, streams and the Abort calls of
// canceled streams all end with Close. With benchServerEnv set, the test binary is instead
// the engine a benchmark talks to, in its own process so that its allocations are not
// counted as the client's.
func TestMain(m *testing.M) {
	if d := os.Getenv(benchServerEnv); d != "" {
		serveForBenchmark(d)
		return
	}
	goleak.VerifyTestMain(m)
}
