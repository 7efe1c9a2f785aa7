package stall

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

func register(t *testing.T, n int) (*worker.Registry, []*worker.Worker) {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	var ws []*worker.Worker
	for i := range n {
		spec := worker.Spec{URL: "http://127.0.0.1:" + string(rune('1'+i)) + "000"}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := reg.Add(context.Background(), spec, worker.StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return reg, ws
}

// fakeProbe answers as alive says and counts the probes.
type fakeProbe struct {
	alive atomic.Bool
	calls atomic.Int64
}

func (f *fakeProbe) probe(_ context.Context, _ *worker.Worker, _ time.Duration) bool {
	f.calls.Add(1)
	return f.alive.Load()
}

func newMonitor(t *testing.T, reg *worker.Registry, p *fakeProbe) *Monitor {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Probe, cfg.Logger = p.probe, testutil.Quiet
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const ms = int64(time.Millisecond)

// answer records one request on w answered after ttfb, ending at now.
func answer(w *worker.Worker, now, ttfb int64) {
	w.NoteSent(now - ttfb)
	w.NoteFirstByte(now-ttfb, now)
}

// TestStoppedWorkerIsExcludedThenCut: a worker whose requests wait past the threshold while
// the other answers gets no new work; when it does not answer the probe either its waits are
// cut; its next first byte makes it routable again.
func TestStoppedWorkerIsExcludedThenCut(t *testing.T) {
	reg, ws := register(t, 2)
	stopped, other := ws[0], ws[1]
	p := &fakeProbe{}
	m := newMonitor(t, reg, p)
	t0 := int64(time.Hour)
	answer(other, t0, 50*ms)
	stopped.NoteSent(t0)
	m.Check(t0 + 1900*ms)
	if got := m.Threshold(); got != DefaultMinSilence {
		t.Fatalf("threshold %v with a 50 ms typical first byte, want the floor %v", got, DefaultMinSilence)
	}
	if stopped.StallState() != worker.StallNone || !stopped.Routable() {
		t.Fatal("silent for 1.9 s, under the 2 s floor, and already excluded")
	}
	answer(other, t0+2000*ms, 50*ms)
	m.Check(t0 + 2100*ms)
	if stopped.StallState() != worker.StallSilent || stopped.Routable() || !other.Routable() {
		t.Fatalf("after 2.1 s of silence: state %d, routable %v/%v", stopped.StallState(), stopped.Routable(), other.Routable())
	}
	m.probing.Wait()
	m.Check(t0 + 2200*ms)
	if stopped.StallState() != worker.StallUnresponsive {
		t.Fatalf("state %d after an unanswered probe, want unresponsive", stopped.StallState())
	}
	// Nothing waits any more (the cut requests went elsewhere): it stays out until it answers.
	stopped.NoteNoFirstByte()
	m.Check(t0 + 3000*ms)
	if stopped.StallState() != worker.StallUnresponsive || stopped.Routable() {
		t.Fatal("an unresponsive worker came back without answering")
	}
	// It answers a probe (SIGCONT): routable again.
	p.alive.Store(true)
	m.Check(t0 + 4100*ms) // MinSilence after the last probe started: probe again
	m.probing.Wait()
	m.Check(t0 + 4200*ms)
	if !stopped.Routable() {
		t.Fatalf("state %d after an answered probe, want routable", stopped.StallState())
	}
	if p.calls.Load() < 2 {
		t.Fatalf("%d probes, want a second one once MinSilence passed", p.calls.Load())
	}
}

// TestLongPrefillIsExcludedButNotCut: a worker silent past the threshold whose server answers
// the probe (a huge prompt's prefill) gets no new work but its request is never cut; its
// answer makes it routable at once.
func TestLongPrefillIsExcludedButNotCut(t *testing.T) {
	reg, ws := register(t, 2)
	busy, other := ws[0], ws[1]
	p := &fakeProbe{}
	p.alive.Store(true)
	m := newMonitor(t, reg, p)
	t0 := int64(time.Hour)
	busy.NoteSent(t0)
	for i := int64(1); i <= 40; i++ { // 20 s of checks, the other worker answering
		answer(other, t0+i*500*ms, 50*ms)
		m.Check(t0 + i*500*ms)
		m.probing.Wait()
		if busy.StallState() == worker.StallUnresponsive {
			t.Fatalf("cut at %v although its server answers probes", time.Duration(i*500*ms))
		}
	}
	if busy.StallState() != worker.StallSilent || p.calls.Load() < 2 {
		t.Fatalf("state %d after 20 s of silence, %d probes", busy.StallState(), p.calls.Load())
	}
	busy.NoteFirstByte(t0, t0+20_500*ms)
	if !busy.Routable() {
		t.Fatal("its answer did not make it routable")
	}
}

// TestSaturatedFleetIsNotSilent: workers with many requests waiting, each answering one now
// and then, are never silent, however long each request waits.
func TestSaturatedFleetIsNotSilent(t *testing.T) {
	reg, ws := register(t, 2)
	m := newMonitor(t, reg, &fakeProbe{})
	t0 := int64(time.Hour)
	for _, w := range ws {
		for range 100 {
			w.NoteSent(t0)
		}
	}
	for i := int64(1); i <= 200; i++ { // each request waits 10-20 s; one answer per 100 ms
		now := t0 + i*100*ms
		for _, w := range ws {
			w.NoteFirstByte(now-10_000*ms, now)
			w.NoteSent(now)
		}
		m.Check(now)
		for _, w := range ws {
			if w.StallState() != worker.StallNone {
				t.Fatalf("a saturated worker counted as stalled at %v", time.Duration(i*100*ms))
			}
		}
	}
	if m.Typical() < 9*time.Second {
		t.Fatalf("typical first byte %v, want it to follow the 10 s waits", m.Typical())
	}
}

// TestThresholdFollowsTheTypicalFirstByte: with a fleet answering in 1 s, 5 s of silence is
// normal (threshold 8 s); 9 s is not.
func TestThresholdFollowsTheTypicalFirstByte(t *testing.T) {
	reg, ws := register(t, 2)
	slow, other := ws[0], ws[1]
	m := newMonitor(t, reg, &fakeProbe{})
	t0 := int64(time.Hour)
	answer(other, t0, 1000*ms)
	slow.NoteSent(t0)
	answer(other, t0+5000*ms, 1000*ms)
	m.Check(t0 + 5000*ms)
	if m.Threshold() != 8*time.Second || slow.StallState() != worker.StallNone {
		t.Fatalf("threshold %v, state %d after 5 s", m.Threshold(), slow.StallState())
	}
	answer(other, t0+9000*ms, 1000*ms)
	m.Check(t0 + 9000*ms)
	if slow.StallState() != worker.StallSilent {
		t.Fatalf("state %d after 9 s of silence, threshold %v", slow.StallState(), m.Threshold())
	}
}

// TestNobodyLeftIsNeverExcluded: a lone silent worker, or a fleet where every worker is
// silent, keeps its workers routable: there is nowhere else to send the work.
func TestNobodyLeftIsNeverExcluded(t *testing.T) {
	for _, n := range []int{1, 2} {
		reg, ws := register(t, n)
		m := newMonitor(t, reg, &fakeProbe{})
		t0 := int64(time.Hour)
		for _, w := range ws {
			w.NoteSent(t0)
		}
		m.Check(t0 + 60_000*ms)
		for _, w := range ws {
			if !w.Routable() {
				t.Fatalf("%d workers all silent: one was excluded", n)
			}
		}
	}
}

// TestZeroTurnsItOff: --worker-stall-secs 0 is valid and Run returns at once; negative
// values are refused with the fix.
func TestZeroTurnsItOff(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinSilence = 0
	m, err := New(cfg, func() *worker.Snapshot { t.Fatal("checked with detection off"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	m.Run(context.Background()) // returns at once
	cfg.MinSilence = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative --worker-stall-secs accepted")
	}
	bad := DefaultConfig()
	bad.Factor = 0.5
	if bad.Validate() == nil {
		t.Fatal("a factor under 1 accepted")
	}
}

// TestAccountingDoesNotAllocate: the request path's records allocate nothing.
func TestAccountingDoesNotAllocate(t *testing.T) {
	_, ws := register(t, 1)
	w := ws[0]
	if n := testing.AllocsPerRun(1000, func() {
		w.NoteSent(1)
		w.NoteFirstByte(1, 2)
		w.NoteSent(3)
		w.NoteNoFirstByte()
		_ = w.Routable()
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
