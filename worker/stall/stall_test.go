package stall

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/workertest"
)

func register(t *testing.T, n int) (*worker.Registry, []*worker.Worker) {
	t.Helper()
	reg := newRegistry(t)
	var ws []*worker.Worker
	for i := range n {
		ws = append(ws, addWorker(t, reg, worker.Spec{URL: "http://127.0.0.1:" + string(rune('1'+i)) + "000"}))
	}
	return reg, ws
}

func newRegistry(t *testing.T) *worker.Registry {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// addWorker registers spec ready.
func addWorker(t *testing.T, reg *worker.Registry, spec worker.Spec) *worker.Worker {
	t.Helper()
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	w, err := reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fakeProbe answers as alive says and counts the probes.
type fakeProbe struct {
	alive   atomic.Bool
	calls   atomic.Int64
	timeout atomic.Int64 // the last probe's timeout
}

func (f *fakeProbe) probe(_ context.Context, _ *worker.Worker, timeout time.Duration) bool {
	f.calls.Add(1)
	f.timeout.Store(int64(timeout))
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
	workertest.NoteSent(w, now-ttfb)
	workertest.NoteFirstByte(w, now-ttfb, now)
}

// TestStoppedWorkerIsExcludedThenCut: a worker whose requests wait past half the threshold
// while the other answers is probed; when the silence reaches the threshold it gets no new
// work and, its probe unanswered, its waits are cut at once; its next answered probe makes it
// routable again.
func TestStoppedWorkerIsExcludedThenCut(t *testing.T) {
	reg, ws := register(t, 2)
	stopped, other := ws[0], ws[1]
	p := &fakeProbe{}
	m := newMonitor(t, reg, p)
	t0 := int64(time.Hour)
	answer(other, t0, 50*ms)
	workertest.NoteSent(stopped, t0)
	m.Check(t0 + 900*ms)
	if p.calls.Load() != 0 {
		t.Fatal("probed under half the threshold")
	}
	m.Check(t0 + 1100*ms)
	m.probing.Wait()
	if p.calls.Load() != 1 || p.timeout.Load() != int64(DefaultProbeTimeout) {
		t.Fatalf("%d probes (timeout %v) past half the threshold, want 1 with %v", p.calls.Load(), time.Duration(p.timeout.Load()), DefaultProbeTimeout)
	}
	m.Check(t0 + 1900*ms)
	if got := m.Threshold(); got != DefaultMinSilence {
		t.Fatalf("threshold %v with a 50 ms typical first byte, want the floor %v", got, DefaultMinSilence)
	}
	if stopped.StallState() != worker.StallNone || !stopped.Routable() {
		t.Fatal("silent for 1.9 s, under the 2 s floor, and already excluded")
	}
	answer(other, t0+2000*ms, 50*ms)
	m.Check(t0 + 2100*ms)
	if stopped.StallState() != worker.StallUnresponsive || stopped.Routable() || !other.Routable() {
		t.Fatalf("after 2.1 s of silence and an unanswered probe: state %d, routable %v/%v; want cut at once", stopped.StallState(), stopped.Routable(), other.Routable())
	}
	if m.silent.Get() != 1 || m.cut.Get() != 1 {
		t.Fatalf("stalls counted silent %d, unresponsive %d; want 1 and 1", m.silent.Get(), m.cut.Get())
	}
	// Nothing waits any more (the cut requests went elsewhere): it stays out until it answers.
	workertest.NoteNoFirstByte(stopped)
	m.Check(t0 + 3000*ms)
	if stopped.StallState() != worker.StallUnresponsive || stopped.Routable() {
		t.Fatal("an unresponsive worker came back without answering")
	}
	// It answers a probe (SIGCONT): routable again.
	p.alive.Store(true)
	m.Check(t0 + 3200*ms) // MinSilence after the last probe started: probe again
	m.probing.Wait()
	m.Check(t0 + 3300*ms)
	if !stopped.Routable() {
		t.Fatalf("state %d after an answered probe, want routable", stopped.StallState())
	}
	if p.calls.Load() != 2 {
		t.Fatalf("%d probes, want a second one once MinSilence passed", p.calls.Load())
	}
}

// TestPendingProbeCutsWhenItFails: a worker whose probe has not ended when its silence
// reaches the threshold is excluded, not cut; it is cut at the check after its probe went
// unanswered.
func TestPendingProbeCutsWhenItFails(t *testing.T) {
	reg, ws := register(t, 2)
	stopped, other := ws[0], ws[1]
	release := make(chan struct{})
	cfg := DefaultConfig()
	cfg.Logger = testutil.Quiet
	cfg.Probe = func(context.Context, *worker.Worker, time.Duration) bool { <-release; return false }
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(time.Hour)
	workertest.NoteSent(stopped, t0)
	answer(other, t0+1100*ms, 50*ms)
	m.Check(t0 + 1100*ms) // the probe starts and hangs
	answer(other, t0+2100*ms, 50*ms)
	m.Check(t0 + 2100*ms)
	if stopped.StallState() != worker.StallSilent {
		t.Fatalf("state %d with its probe still out, want silent (excluded, not cut)", stopped.StallState())
	}
	close(release)
	m.probing.Wait()
	m.Check(t0 + 2350*ms)
	if stopped.StallState() != worker.StallUnresponsive {
		t.Fatalf("state %d after the probe failed, want unresponsive", stopped.StallState())
	}
}

// TestProbeOfAnEarlierSilenceDoesNotCut: a probe that went unanswered before the worker
// answered again says nothing about its next silence: that one gets its own probe before
// anything is cut.
func TestProbeOfAnEarlierSilenceDoesNotCut(t *testing.T) {
	reg, ws := register(t, 2)
	w, other := ws[0], ws[1]
	p := &fakeProbe{}
	m := newMonitor(t, reg, p)
	t0 := int64(time.Hour)
	workertest.NoteSent(w, t0)
	answer(other, t0+1100*ms, 50*ms)
	m.Check(t0 + 1100*ms)
	m.probing.Wait() // unanswered
	workertest.NoteFirstByte(w, t0, t0+1500*ms)
	workertest.NoteSent(w, t0+1500*ms) // a new silence from 1.5 s
	p.alive.Store(true)
	answer(other, t0+3600*ms, 50*ms)
	m.Check(t0 + 3600*ms) // 2.1 s of silence, no probe of it yet
	if w.StallState() != worker.StallNone {
		t.Fatalf("state %d on the strength of an earlier silence's probe, want a new probe first", w.StallState())
	}
	m.probing.Wait()
	m.Check(t0 + 3700*ms)
	if w.StallState() != worker.StallSilent || p.calls.Load() != 2 {
		t.Fatalf("state %d after %d probes, want silent (answered probe) after 2", w.StallState(), p.calls.Load())
	}
}

// TestLoneWorkerOfAModelIsNotExcluded: "another worker answers" is judged per model and per
// worker type: the only worker of a model, or the only prefill worker, keeps its requests
// however many workers of other models or types answer; a worker whose model has another
// answering worker (or one of unknown model, which serves any) is excluded.
func TestLoneWorkerOfAModelIsNotExcluded(t *testing.T) {
	reg := newRegistry(t)
	add := func(port, model, typ string) *worker.Worker {
		return addWorker(t, reg, worker.Spec{URL: "http://127.0.0.1:" + port, ModelID: model, WorkerType: typ})
	}
	a1, a2 := add("1001", "a", ""), add("1002", "a", "")
	lone := add("1003", "b", "")
	prefill, decode := add("1004", "c", worker.TypePrefill), add("1005", "c", worker.TypeDecode)
	p := &fakeProbe{}
	m := newMonitor(t, reg, p)
	t0 := int64(time.Hour)
	for _, w := range []*worker.Worker{a1, lone, prefill} {
		workertest.NoteSent(w, t0)
	}
	for _, now := range []int64{t0 + 1100*ms, t0 + 2100*ms} {
		for _, w := range []*worker.Worker{a2, decode} {
			answer(w, now, 50*ms)
		}
		m.Check(now)
		m.probing.Wait()
	}
	if a1.Routable() {
		t.Fatal("a silent worker of model a stayed routable while the other worker of a answers")
	}
	if !lone.Routable() || !prefill.Routable() {
		t.Fatalf("lone worker of b routable %v, lone prefill worker of c routable %v: both must keep their requests", lone.Routable(), prefill.Routable())
	}
	if p.calls.Load() != 1 {
		t.Fatalf("%d probes, want 1 (only a1 could be excluded)", p.calls.Load())
	}

	// A worker of unknown model serves any: with it answering, the lone worker of b has
	// somewhere else to send its work.
	any := add("1006", "", "")
	if len(any.Models) != 0 {
		t.Fatalf("a spec without model_id declares %v", any.Models)
	}
	answer(any, t0+2200*ms, 50*ms)
	m.Check(t0 + 2200*ms)
	m.probing.Wait()
	m.Check(t0 + 2300*ms)
	if lone.Routable() {
		t.Fatal("the lone worker of b stayed routable although a worker of unknown model answers")
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
	workertest.NoteSent(busy, t0)
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
	workertest.NoteFirstByte(busy, t0, t0+20_500*ms)
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
			workertest.NoteSent(w, t0)
		}
	}
	for i := int64(1); i <= 200; i++ { // each request waits 10-20 s; one answer per 100 ms
		now := t0 + i*100*ms
		for _, w := range ws {
			workertest.NoteFirstByte(w, now-10_000*ms, now)
			workertest.NoteSent(w, now)
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
	// The probe started at half the threshold answers: this test is about when the worker
	// goes silent, and an unanswered probe that ended before the 9 s check would take it
	// straight on to unresponsive (the probe runs on its own goroutine).
	probe := &fakeProbe{}
	probe.alive.Store(true)
	m := newMonitor(t, reg, probe)
	t0 := int64(time.Hour)
	answer(other, t0, 1000*ms)
	workertest.NoteSent(slow, t0)
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
			workertest.NoteSent(w, t0)
		}
		m.Check(t0 + 60_000*ms)
		for _, w := range ws {
			if !w.Routable() {
				t.Fatalf("%d workers all silent: one was excluded", n)
			}
		}
	}
}

// TestRunChecksOnTheClock: Run checks every Interval of its clock, at the clock's Nanos: a
// fake clock an hour on (far from the process's real Nanos) moved past half the threshold of
// a worker's silence makes Run probe it.
func TestRunChecksOnTheClock(t *testing.T) {
	reg, ws := register(t, 2)
	stopped, other := ws[0], ws[1]
	p := &fakeProbe{}
	fake := clock.NewFake()
	fake.Advance(time.Hour)
	cfg := DefaultConfig()
	cfg.Probe, cfg.Logger, cfg.Clock = p.probe, testutil.Quiet, fake
	m, err := New(cfg, reg.Current)
	if err != nil {
		t.Fatal(err)
	}
	t0 := fake.Nanos()
	answer(other, t0, 50*ms)
	workertest.NoteSent(stopped, t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	testutil.Eventually(t, "Run's ticker", func() bool { return fake.Waiting() == 1 })
	fake.Advance(DefaultInterval)        // a check at 250 ms of silence: under half the threshold
	fake.Advance(900 * time.Millisecond) // one at 1.15 s: past it
	testutil.Eventually(t, "a probe once the clock passed half the threshold", func() bool { return p.calls.Load() == 1 })
	cancel()
	<-done
	m.probing.Wait()
	if stopped.StallState() != worker.StallNone {
		t.Fatalf("state %d after 1.15 s of silence, want none yet", stopped.StallState())
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
		workertest.NoteSent(w, 1)
		workertest.NoteFirstByte(w, 1, 2)
		workertest.NoteSent(w, 3)
		workertest.NoteNoFirstByte(w)
		_ = w.Routable()
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
