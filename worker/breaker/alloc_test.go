//go:build !race

package breaker

import "testing"

// TestHotPathAllocatesNothing covers every method the request path calls, in the closed
// state (the common case) and through half-open probes and transitions.
func TestHotPathAllocatesNothing(t *testing.T) {
	var closed Breaker
	if n := testing.AllocsPerRun(1000, func() {
		closed.Available(1)
		p, _ := closed.TryAcquire(1)
		closed.Record(p, Success, 1)
		p, _ = closed.TryAcquire(1)
		closed.Record(p, Backpressure, 1)
	}); n != 0 {
		t.Fatalf("closed breaker: %v allocations per request", n)
	}
	b, _ := newTest(t, testConfig())
	b.s.onTransition = nil // the test hook appends; production hooks increment counters
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		for range 3 { // open
			p, _ := b.TryAcquire(now)
			b.Record(p, Fault, now)
		}
		now += sec(5) // half-open
		b.State(now)
		p1, _ := b.TryAcquire(now)
		p2, _ := b.TryAcquire(now)
		b.Available(now)
		b.Record(p1, Success, now)
		b.Record(p2, ClientError, now) // closed
		b.Stats(now)
		now += sec(1)
	}); n != 0 {
		t.Fatalf("breaker cycling through every state: %v allocations per cycle", n)
	}
	if b.Transitions(HalfOpen, Closed) < 1000 {
		t.Fatalf("the cycle did not close the breaker each time: %d", b.Transitions(HalfOpen, Closed))
	}
}
