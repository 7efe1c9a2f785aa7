package breaker

import (
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
)

// TestAvailableNowReadsTheConfiguredClock: the policies' read (AvailableNow) takes its time
// from Config.Clock, so a fake clock moves an open breaker to half-open when the test
// advances it past Timeout, and only then.
func TestAvailableNowReadsTheConfiguredClock(t *testing.T) {
	fake := clock.NewFake()
	fake.Advance(time.Hour) // a clock far from the process's: the package clock would disagree
	cfg := testConfig()
	cfg.Clock = fake
	b, _ := newTest(t, cfg)
	openBreaker(t, b, fake.Nanos())
	if b.AvailableNow() {
		t.Fatal("an open breaker is available at once")
	}
	fake.Advance(cfg.Timeout - time.Millisecond)
	if b.AvailableNow() {
		t.Fatal("an open breaker is available before its timeout")
	}
	fake.Advance(time.Millisecond)
	if !b.AvailableNow() || b.State(b.Now()) != HalfOpen {
		t.Fatalf("after its timeout: available %v, state %v; want a half-open breaker", b.AvailableNow(), b.State(b.Now()))
	}
}
