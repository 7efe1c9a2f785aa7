package worker

import (
	"context"
	"testing"
	"unsafe"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/worker/breaker"
)

// newTestWorker returns a Worker outside any registry, for tests of its accounting.
func newTestWorker() *Worker { return &Worker{cold: &cold{}} }

// TestWorkerIsOneCacheLine: what a scan reads of each candidate is the Worker itself, one
// 64-byte line, and the slab's chunks keep consecutive Workers on consecutive lines.
func TestWorkerIsOneCacheLine(t *testing.T) {
	if got := unsafe.Sizeof(Worker{}); got != 64 {
		t.Fatalf("sizeof(Worker) = %d bytes, want one 64-byte cache line", got)
	}
	var s slab
	first := s.next()
	if uintptr(unsafe.Pointer(first))%64 != 0 {
		t.Fatalf("a slab chunk starts at %p, not on a cache line", first)
	}
	prev := first
	for range slabChunk - 1 {
		w := s.next()
		if d := uintptr(unsafe.Pointer(w)) - uintptr(unsafe.Pointer(prev)); d != 64 {
			t.Fatalf("consecutive slab Workers %d bytes apart, want 64", d)
		}
		prev = w
	}
}

// TestStateWordParts: the status, the overload veto, the stall state and the breaker bit share
// one word; each writer changes its own part only, and Routable is true exactly when the
// worker is Ready with no veto.
func TestStateWordParts(t *testing.T) {
	w := newTestWorker()
	w.setStatus(StatusReady)
	if !w.Routable() {
		t.Fatal("a Ready worker with no veto is not routable")
	}
	w.SetOverloaded(true)
	w.SetStallState(StallUnresponsive)
	if w.Status() != StatusReady || !w.Overloaded() || w.StallState() != StallUnresponsive || w.Routable() {
		t.Fatalf("status %v overloaded %v stall %d routable %v: want ready, true, %d, false",
			w.Status(), w.Overloaded(), w.StallState(), w.Routable(), StallUnresponsive)
	}
	if w.CompareAndSetStallState(StallSilent, StallNone) {
		t.Fatal("CompareAndSetStallState succeeded from a state the worker is not in")
	}
	if !w.CompareAndSetStallState(StallUnresponsive, StallSilent) || w.StallState() != StallSilent {
		t.Fatalf("stall %d after moving from unresponsive to silent", w.StallState())
	}
	w.setStatus(StatusNotReady)
	if w.Status() != StatusNotReady || !w.Overloaded() || w.StallState() != StallSilent {
		t.Fatal("setting the status changed another part of the word")
	}
	w.noteSent(1)
	w.noteFirstByte(1, 2) // an answer clears the stall
	w.SetOverloaded(false)
	w.setStatus(StatusReady)
	if w.StallState() != StallNone || w.Overloaded() || !w.Routable() {
		t.Fatalf("stall %d overloaded %v routable %v after clearing every veto", w.StallState(), w.Overloaded(), w.Routable())
	}
}

// TestBreakerBitFollowsTransitions: a registered worker's breaker opening makes it
// unroutable through the state word, and closing again makes it routable.
func TestBreakerBitFollowsTransitions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Breaker = breaker.Config{FailureThreshold: 2, SuccessThreshold: 1, Timeout: 1e9, Window: 10e9, MaxHalfOpenProbes: 1, Clock: clock.Real{}}
	reg, err := NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	spec := Spec{URL: "http://127.0.0.1:1"}
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	w, err := reg.Add(context.Background(), spec, StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1e12)
	for range 2 {
		p, ok := w.Breaker.TryAcquire(now)
		if !ok {
			t.Fatal("closed breaker refused a request")
		}
		w.Breaker.Record(p, breaker.Fault, now)
	}
	if w.Breaker.Closed() || w.state.Load()&stateBreaker == 0 {
		t.Fatalf("breaker closed %v, state word %#x after two failures: want open and the breaker bit set", w.Breaker.Closed(), w.state.Load())
	}
	if !w.Breaker.Available(now + 2e9) { // its timeout has passed: half-open admits a probe
		t.Fatal("breaker past its timeout admits no probe")
	}
	p, ok := w.Breaker.TryAcquire(now + 2e9)
	if !ok {
		t.Fatal("half-open breaker refused its probe")
	}
	w.Breaker.Record(p, breaker.Success, now+2e9)
	if !w.Breaker.Closed() || w.state.Load() != uint32(StatusReady) || !w.Routable() {
		t.Fatalf("breaker closed %v, state word %#x, routable %v after a successful probe", w.Breaker.Closed(), w.state.Load(), w.Routable())
	}
}

// TestLoadReportScoreFieldsShareALine: what the expected-wait score reads of a report lies in
// its first 64 bytes.
func TestLoadReportScoreFieldsShareALine(t *testing.T) {
	var r LoadReport
	for name, end := range map[string]uintptr{
		"WaitingTokens": unsafe.Offsetof(r.WaitingTokens) + unsafe.Sizeof(r.WaitingTokens),
		"kvUsage":       unsafe.Offsetof(r.kvUsage) + unsafe.Sizeof(r.kvUsage),
		"kvPerRequest":  unsafe.Offsetof(r.kvPerRequest) + unsafe.Sizeof(r.kvPerRequest),
		"since":         unsafe.Offsetof(r.since) + unsafe.Sizeof(r.since),
		"stepSeconds":   unsafe.Offsetof(r.stepSeconds) + unsafe.Sizeof(r.stepSeconds),
	} {
		if end > 64 {
			t.Errorf("LoadReport.%s ends at byte %d, past the first cache line", name, end)
		}
	}
	if got := unsafe.Sizeof(r); got != 128 {
		t.Errorf("sizeof(LoadReport) = %d, want 128 (its own size class, 64-byte aligned)", got)
	}
}
