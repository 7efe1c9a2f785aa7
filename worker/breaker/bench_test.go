package breaker

import (
	"testing"

	"github.com/smg-go/smg/internal/clock"
)

// BenchmarkClosedRequest is the per-request cost on a healthy worker: the policy's Available
// check, the gateway's TryAcquire and Record(Success), from all cores at once.
func BenchmarkClosedRequest(b *testing.B) {
	var br Breaker
	now := clock.Nanos()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br.Available(now)
			p, _ := br.TryAcquire(now)
			br.Record(p, Success, now)
		}
	})
}

// BenchmarkClosedFault is the cost of recording a fault while closed (window update and
// count), under a threshold high enough never to open.
func BenchmarkClosedFault(b *testing.B) {
	var br Breaker
	cfg := DefaultConfig()
	cfg.FailureThreshold = MaxFailureThreshold
	if err := br.Init(cfg, nil); err != nil {
		b.Fatal(err)
	}
	now := clock.Nanos()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := br.TryAcquire(now)
			br.Record(p, Fault, now)
		}
	})
}

// BenchmarkNow is the clock the gateway passes in.
func BenchmarkNow(b *testing.B) {
	var sink int64
	for range b.N {
		sink += clock.Nanos()
	}
	_ = sink
}
