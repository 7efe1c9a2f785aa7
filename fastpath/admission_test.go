package fastpath

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAdmissionQueuesThenRefuses(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 2, QueueSize: 1, QueueTimeout: time.Hour})
	for range 2 {
		if _, ok := a.admit(); !ok {
			t.Fatal("a free slot was refused")
		}
	}
	got := make(chan bool)
	go func() { _, ok := a.admit(); got <- ok }() // waits in the queue
	for a.waiting.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	if e, ok := a.admit(); ok || e.code != "admission_queue_full" {
		t.Fatalf("queue full: %v %v", e, ok)
	}
	a.release()
	if !<-got {
		t.Fatal("the waiter did not get the freed slot")
	}
	if a.active.Load() != 2 || a.waiting.Load() != 0 {
		t.Fatalf("active %d waiting %d", a.active.Load(), a.waiting.Load())
	}
}

func TestAdmissionQueueTimeout(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 1, QueueSize: 5, QueueTimeout: 10 * time.Millisecond})
	a.admit()
	if e, ok := a.admit(); ok || e.code != "admission_queue_timeout" || e.status != 503 {
		t.Fatalf("%v %v", e, ok)
	}
}

func TestAdmissionNeverExceedsLimitUnderContention(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 3, QueueSize: 1000, QueueTimeout: time.Minute})
	var inside, peak atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, ok := a.admit(); !ok {
					t.Error("refused with a deep queue")
					return
				}
				n := inside.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inside.Add(-1)
				a.release()
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 3 || a.active.Load() != 0 {
		t.Fatalf("peak %d active %d", peak.Load(), a.active.Load())
	}
}

func TestRateLimitAllowsOneSecondBurst(t *testing.T) {
	a := newAdmission(AdmissionConfig{RatePerSecond: 100})
	allowed := 0
	for range 300 {
		if _, ok := a.admit(); ok {
			allowed++
		}
	}
	// A burst of one second's worth passes at once (100, plus what accrues meanwhile); the
	// rest is refused.
	if allowed < 100 || allowed > 130 {
		t.Fatalf("%d of 300 allowed at 100/s", allowed)
	}
	if e, ok := a.admit(); ok || e.code != "rate_limit_exceeded" {
		t.Fatalf("%v %v", e, ok)
	}
}

// TestQueueSizeZeroMeansNoQueue: --queue-size 0 lets nobody wait (it used to mean the default
// of 100, issue 16): past the cap a request is refused at once.
func TestQueueSizeZeroMeansNoQueue(t *testing.T) {
	a := newAdmission(AdmissionConfig{MaxConcurrent: 1, QueueSize: 0, QueueTimeout: time.Hour})
	if _, ok := a.admit(); !ok {
		t.Fatal("the first request was refused")
	}
	if e, ok := a.admit(); ok || e != errQueueFull {
		t.Fatalf("past the cap with no queue: ok %v, %v; want 429 queue full at once", ok, e)
	}
	a.release()
}
