package breaker

import (
	"testing"
	"time"

	"github.com/smg-go/smg/internal/clock"
)

// sec converts seconds of the fake clock to the breaker's nanoseconds.
func sec(s float64) int64 { return int64(s * float64(time.Second)) }

// testConfig is small enough to walk through by hand: open after 3 faults within 10 s, stay
// open 5 s, close after 2 successful probes, at most 2 probes at a time.
func testConfig() Config {
	return Config{FailureThreshold: 3, SuccessThreshold: 2, Timeout: 5 * time.Second, Window: 10 * time.Second, MaxHalfOpenProbes: 2, Clock: clock.Real{}}
}

type transition struct{ from, to State }

// newTest returns an initialised breaker and the transitions its hook saw.
func newTest(t *testing.T, cfg Config) (*Breaker, *[]transition) {
	t.Helper()
	var seen []transition
	b := new(Breaker)
	if err := b.Init(cfg, func(from, to State) { seen = append(seen, transition{from, to}) }); err != nil {
		t.Fatal(err)
	}
	return b, &seen
}

// record acquires a permit at now and records o with it.
func record(t *testing.T, b *Breaker, o Outcome, now int64) {
	t.Helper()
	p, ok := b.TryAcquire(now)
	if !ok {
		t.Fatalf("TryAcquire at %v s refused; state %v", float64(now)/1e9, b.State(now))
	}
	b.Record(p, o, now)
}

func wantState(t *testing.T, b *Breaker, now int64, want State) {
	t.Helper()
	if got := b.State(now); got != want {
		t.Fatalf("state at %v s = %v, want %v (stats %+v)", float64(now)/1e9, got, want, b.Stats(now))
	}
}

// openBreaker drives a testConfig breaker open at now.
func openBreaker(t *testing.T, b *Breaker, now int64) {
	t.Helper()
	for range 3 {
		record(t, b, Fault, now)
	}
	wantState(t, b, now, Open)
}

func TestZeroValueIsClosedWithDefaults(t *testing.T) {
	var b Breaker
	wantState(t, &b, 0, Closed)
	for i := range DefaultFailureThreshold - 1 {
		record(t, &b, Fault, sec(float64(i)))
	}
	wantState(t, &b, sec(9), Closed)
	record(t, &b, Fault, sec(9))
	wantState(t, &b, sec(9), Open)
	wantState(t, &b, sec(9)+DefaultTimeout.Nanoseconds()-int64(time.Millisecond), Open)
	wantState(t, &b, sec(9)+DefaultTimeout.Nanoseconds(), HalfOpen)
}

func TestClosedOpensAtFailureThreshold(t *testing.T) {
	for _, threshold := range []int{1, 2, 3, 10} {
		cfg := testConfig()
		cfg.FailureThreshold = threshold
		b, seen := newTest(t, cfg)
		now := sec(1)
		for i := 1; i < threshold; i++ {
			record(t, b, Fault, now)
			wantState(t, b, now, Closed)
			if got := b.Stats(now).Faults; got != i {
				t.Fatalf("threshold %d: %d faults counted after %d", threshold, got, i)
			}
		}
		record(t, b, Fault, now)
		wantState(t, b, now, Open)
		if len(*seen) != 1 || (*seen)[0] != (transition{Closed, Open}) || b.Transitions(Closed, Open) != 1 {
			t.Fatalf("threshold %d: transitions %v, counter %d", threshold, *seen, b.Transitions(Closed, Open))
		}
		if _, ok := b.TryAcquire(now); ok || b.Available(now) {
			t.Fatalf("threshold %d: open breaker admits requests", threshold)
		}
	}
}

func TestOutcomesWhileClosed(t *testing.T) {
	for _, tc := range []struct {
		o      Outcome
		forget bool // the outcome forgets the counted faults
	}{
		{Success, true},
		{ClientError, true},
		{Backpressure, false},
		{Abandoned, false},
	} {
		b, _ := newTest(t, testConfig())
		record(t, b, Fault, sec(1))
		record(t, b, Fault, sec(1))
		record(t, b, tc.o, sec(1))
		want := 2
		if tc.forget {
			want = 0
		}
		if got := b.Stats(sec(1)).Faults; got != want {
			t.Fatalf("%v after 2 faults: %d faults counted, want %d", tc.o, got, want)
		}
		record(t, b, Fault, sec(1))
		wantOpen := !tc.forget
		if got := b.State(sec(1)) == Open; got != wantOpen {
			t.Fatalf("%v between faults: open after third fault = %v, want %v", tc.o, got, wantOpen)
		}
	}
}

// TestWindowExpiry walks the exact window rule with a 10 s window of 1 s buckets: a fault
// stops counting when the clock enters the tenth bucket after its own.
func TestWindowExpiry(t *testing.T) {
	b, _ := newTest(t, testConfig())
	record(t, b, Fault, sec(0.5)) // bucket 0: counts until 10 s
	record(t, b, Fault, sec(5))   // bucket 5: counts until 15 s
	if got := b.Stats(sec(9.999)).Faults; got != 2 {
		t.Fatalf("faults at 9.999 s = %d, want 2", got)
	}
	if got := b.Stats(sec(10)).Faults; got != 1 {
		t.Fatalf("faults at 10 s = %d, want 1: the fault of 0.5 s must have expired", got)
	}
	record(t, b, Fault, sec(10)) // 2 in window: stays closed
	wantState(t, b, sec(10), Closed)
	record(t, b, Fault, sec(14.9)) // 5 s, 10 s, 14.9 s: three within the window
	wantState(t, b, sec(14.9), Open)
}

// TestWindowBounds checks the documented bounds for faults at many offsets within a bucket:
// a fault counts at its time + 9/10 Window - 1 ns and never at its time + Window.
func TestWindowBounds(t *testing.T) {
	cfg := testConfig()
	cfg.FailureThreshold = 100
	for off := int64(0); off < sec(1); off += sec(1) / 16 {
		b, _ := newTest(t, cfg)
		at := sec(100) + off
		record(t, b, Fault, at)
		if got := b.Stats(at + sec(9) - 1).Faults; got != 1 {
			t.Fatalf("fault at %d ns: not counted 9/10 of the window later", at)
		}
		if got := b.Stats(at + sec(10)).Faults; got != 0 {
			t.Fatalf("fault at %d ns: still counted a whole window later", at)
		}
	}
}

func TestSlowFaultsNeverOpen(t *testing.T) {
	// One fault every 5 s and no success: the fault of 10 s ago has always just expired, so
	// no more than two ever count. The spec product's consecutive count would open.
	b, _ := newTest(t, testConfig())
	for i := range 20 {
		record(t, b, Fault, sec(float64(5*i)))
		wantState(t, b, sec(float64(5*i)), Closed)
	}
}

func TestOpenTurnsHalfOpenAfterTimeout(t *testing.T) {
	b, seen := newTest(t, testConfig())
	openBreaker(t, b, sec(1))
	before := sec(6) - int64(time.Millisecond)
	if b.Available(before) {
		t.Fatal("available 1 ms before the timeout")
	}
	if _, ok := b.TryAcquire(before); ok {
		t.Fatal("admitted 1 ms before the timeout")
	}
	wantState(t, b, before, Open)
	if !b.Available(sec(6)) {
		t.Fatal("not available once the timeout passed")
	}
	wantState(t, b, sec(6), HalfOpen)
	want := []transition{{Closed, Open}, {Open, HalfOpen}}
	if len(*seen) != 2 || (*seen)[0] != want[0] || (*seen)[1] != want[1] {
		t.Fatalf("transitions %v, want %v", *seen, want)
	}
	// Observing again makes no further transition.
	wantState(t, b, sec(7), HalfOpen)
	if b.Transitions(Open, HalfOpen) != 1 {
		t.Fatalf("open->half_open counted %d times", b.Transitions(Open, HalfOpen))
	}
}

func TestHalfOpenAdmitsBoundedProbes(t *testing.T) {
	b, _ := newTest(t, testConfig())
	openBreaker(t, b, sec(1))
	now := sec(6)
	p1, ok1 := b.TryAcquire(now)
	p2, ok2 := b.TryAcquire(now)
	if !ok1 || !ok2 || !p1.Probe() || !p2.Probe() {
		t.Fatal("half-open breaker refused its first two probes")
	}
	if _, ok := b.TryAcquire(now); ok {
		t.Fatal("half-open breaker admitted a third concurrent probe")
	}
	if b.Available(now) {
		t.Fatal("available with every probe slot taken")
	}
	b.Record(p1, Backpressure, now) // neutral: frees the slot, no success
	if st := b.Stats(now); st.Probes != 1 || st.Successes != 0 || st.State != HalfOpen {
		t.Fatalf("after a backpressured probe: %+v", st)
	}
	p3, ok := b.TryAcquire(now)
	if !ok {
		t.Fatal("slot freed by a neutral outcome was not reusable")
	}
	b.Record(p3, Abandoned, now)
	b.Record(p2, Abandoned, now)
	if st := b.Stats(now); st.Probes != 0 || st.State != HalfOpen {
		t.Fatalf("after abandoned probes: %+v", st)
	}
}

func TestHalfOpenClosesAfterSuccessThreshold(t *testing.T) {
	for _, second := range []Outcome{Success, ClientError} {
		b, seen := newTest(t, testConfig())
		openBreaker(t, b, sec(1))
		now := sec(6)
		p1, _ := b.TryAcquire(now)
		p2, _ := b.TryAcquire(now)
		b.Record(p1, Success, now)
		if st := b.Stats(now); st.State != HalfOpen || st.Successes != 1 || st.Probes != 1 {
			t.Fatalf("after one good probe: %+v", st)
		}
		b.Record(p2, second, now)
		wantState(t, b, now, Closed)
		if got := (*seen)[len(*seen)-1]; got != (transition{HalfOpen, Closed}) {
			t.Fatalf("last transition %v", got)
		}
		// Closed starts from an empty window: the faults that opened it are gone.
		if got := b.Stats(now).Faults; got != 0 {
			t.Fatalf("closed with %d faults still counted", got)
		}
		record(t, b, Fault, now)
		record(t, b, Fault, now)
		wantState(t, b, now, Closed)
	}
}

func TestHalfOpenFaultReopens(t *testing.T) {
	b, seen := newTest(t, testConfig())
	openBreaker(t, b, sec(1))
	p1, _ := b.TryAcquire(sec(6))
	p2, _ := b.TryAcquire(sec(6))
	b.Record(p1, Success, sec(7))
	b.Record(p2, Fault, sec(8))
	wantState(t, b, sec(8), Open)
	// Open again for a full timeout from the faulty probe.
	wantState(t, b, sec(13)-int64(time.Millisecond), Open)
	wantState(t, b, sec(13), HalfOpen)
	// The new episode starts with no successes and free slots.
	if st := b.Stats(sec(13)); st.Successes != 0 || st.Probes != 0 {
		t.Fatalf("new half-open episode inherited %+v", st)
	}
	want := []transition{{Closed, Open}, {Open, HalfOpen}, {HalfOpen, Open}, {Open, HalfOpen}}
	if len(*seen) != len(want) {
		t.Fatalf("transitions %v, want %v", *seen, want)
	}
	for i := range want {
		if (*seen)[i] != want[i] {
			t.Fatalf("transitions %v, want %v", *seen, want)
		}
	}
}

func TestStaleProbeIsIgnored(t *testing.T) {
	b, _ := newTest(t, testConfig())
	openBreaker(t, b, sec(1))
	stale, _ := b.TryAcquire(sec(6))
	failing, _ := b.TryAcquire(sec(6))
	b.Record(failing, Fault, sec(6)) // reopens; stale's episode is over
	wantState(t, b, sec(11), HalfOpen)
	b.Record(stale, Success, sec(11))
	if st := b.Stats(sec(11)); st.Successes != 0 || st.Probes != 0 {
		t.Fatalf("a probe of an ended episode moved the new one: %+v", st)
	}
	// Nor can a stale fault reopen the new episode.
	stale2, _ := b.TryAcquire(sec(11))
	p, _ := b.TryAcquire(sec(11))
	b.Record(p, Success, sec(11))
	b.Record(stale2, Success, sec(11))
	wantState(t, b, sec(11), Closed)
	b.Record(stale2, Fault, sec(11)) // recorded twice by a buggy caller: ignored
	wantState(t, b, sec(11), Closed)
}

func TestOutcomesOfEarlierStatesAreIgnored(t *testing.T) {
	b, _ := newTest(t, testConfig())
	long, _ := b.TryAcquire(0) // a long stream admitted while closed
	openBreaker(t, b, sec(1))
	b.Record(long, Success, sec(2)) // ends while open
	wantState(t, b, sec(2), Open)
	wantState(t, b, sec(6), HalfOpen)
	var closedEra Permit
	b.Record(closedEra, Success, sec(6))
	b.Record(closedEra, Success, sec(6))
	wantState(t, b, sec(6), HalfOpen)
	b.Record(closedEra, Fault, sec(6))
	wantState(t, b, sec(6), HalfOpen)
	if st := b.Stats(sec(6)); st.Successes != 0 || st.Probes != 0 {
		t.Fatalf("closed-era outcomes moved the half-open episode: %+v", st)
	}
}

func TestDisabledBreakerIsAlwaysAvailable(t *testing.T) {
	cfg := testConfig()
	cfg.Disabled = true
	b, seen := newTest(t, cfg)
	for i := range 1000 {
		now := sec(float64(i) / 100)
		p, ok := b.TryAcquire(now)
		if !ok || p.Probe() || !b.Available(now) {
			t.Fatalf("disabled breaker refused request %d", i)
		}
		b.Record(p, Fault, now)
	}
	wantState(t, b, sec(10), Closed)
	if len(*seen) != 0 || b.Stats(sec(10)) != (Stats{State: Closed}) {
		t.Fatalf("disabled breaker moved: %v %+v", *seen, b.Stats(sec(10)))
	}
}

func TestNegativeTimesAreClamped(t *testing.T) {
	b, _ := newTest(t, testConfig())
	record(t, b, Fault, -5)
	record(t, b, Fault, -1)
	record(t, b, Fault, 0)
	wantState(t, b, 0, Open)
	wantState(t, b, sec(5), HalfOpen)
}

func TestTransitionsOutOfRange(t *testing.T) {
	var b Breaker
	if b.Transitions(3, Closed) != 0 || b.Transitions(Closed, 7) != 0 {
		t.Fatal("out-of-range transition counted")
	}
}

func TestStateAndOutcomeNames(t *testing.T) {
	for s, want := range map[State]string{Closed: "closed", Open: "open", HalfOpen: "half_open", 9: "unknown"} {
		if s.String() != want {
			t.Errorf("State(%d) = %q, want %q", s, s.String(), want)
		}
	}
	for o, want := range map[Outcome]string{Success: "success", Fault: "fault", Backpressure: "backpressure", ClientError: "client_error", Abandoned: "abandoned", 9: "unknown"} {
		if o.String() != want {
			t.Errorf("Outcome(%d) = %q, want %q", o, o.String(), want)
		}
	}
}

// TestDefaultWindowExample is the example of docs/reliability-state-machines.md: at the
// defaults a fault every 12 s opens the breaker at the 10th, a fault every 15 s never does.
func TestDefaultWindowExample(t *testing.T) {
	var fast, slow Breaker
	for i := 1; i <= 10; i++ {
		record(t, &fast, Fault, sec(float64(12*i)))
	}
	wantState(t, &fast, sec(120), Open)
	for i := 1; i <= 100; i++ {
		record(t, &slow, Fault, sec(float64(15*i)))
		if st := slow.Stats(sec(float64(15 * i))); st.State != Closed || st.Faults > 8 {
			t.Fatalf("fault %d at %d s: %+v", i, 15*i, st)
		}
	}
}
