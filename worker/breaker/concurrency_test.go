package breaker

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHalfOpenProbeBoundUnderConcurrency lets many goroutines race for the probe slots of a
// half-open breaker, holding what they get: never more than MaxHalfOpenProbes may win.
func TestHalfOpenProbeBoundUnderConcurrency(t *testing.T) {
	for _, probes := range []int{1, 2, 5} {
		cfg := testConfig()
		cfg.MaxHalfOpenProbes = probes
		cfg.SuccessThreshold = 200 // never close during the test
		b, _ := newTest(t, cfg)
		openBreaker(t, b, sec(1))
		now := sec(6)
		var admitted atomic.Int32
		var held sync.WaitGroup
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if p, ok := b.TryAcquire(now); ok {
						admitted.Add(1)
						held.Add(1)
						go func() {
							defer held.Done()
							<-release
							b.Record(p, Abandoned, now)
						}()
					}
				}
			}()
		}
		wg.Wait()
		if got := admitted.Load(); got != int32(probes) {
			t.Fatalf("max %d probes: %d admitted while all were held", probes, got)
		}
		close(release)
		held.Wait()
		if st := b.Stats(now); st.Probes != 0 || st.State != HalfOpen {
			t.Fatalf("after releasing every probe: %+v", st)
		}
	}
}

// TestConcurrentHammerKeepsInvariants races acquisitions and random outcomes on a clock that
// several goroutines advance, then checks that the counted transitions form one path from
// Closed to the final state and that the probe bound held at every admission.
func TestConcurrentHammerKeepsInvariants(t *testing.T) {
	cfg := testConfig()
	var hooked [numStates * numStates]atomic.Uint64
	b := new(Breaker)
	if err := b.Init(cfg, func(from, to State) { hooked[int(from)*numStates+int(to)].Add(1) }); err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	var inFlightProbes, maxProbes atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 3000 {
				now := clock.Add(int64(rng.IntN(int(50 * time.Millisecond))))
				b.Available(now)
				p, ok := b.TryAcquire(now)
				if !ok {
					continue
				}
				if p.Probe() {
					n := inFlightProbes.Add(1)
					for {
						m := maxProbes.Load()
						if n <= m || maxProbes.CompareAndSwap(m, n) {
							break
						}
					}
				}
				o := Outcome(rng.IntN(5))
				if p.Probe() {
					inFlightProbes.Add(-1)
				}
				b.Record(p, o, clock.Load())
			}
		}()
	}
	wg.Wait()
	if m := maxProbes.Load(); m > int32(cfg.MaxHalfOpenProbes) {
		t.Fatalf("%d probes in flight at once, bound %d", m, cfg.MaxHalfOpenProbes)
	}
	c2o, o2h := b.Transitions(Closed, Open), b.Transitions(Open, HalfOpen)
	h2c, h2o := b.Transitions(HalfOpen, Closed), b.Transitions(HalfOpen, Open)
	if c2o == 0 || o2h == 0 || h2c == 0 || h2o == 0 {
		t.Fatalf("hammer did not exercise every transition: c2o %d o2h %d h2c %d h2o %d", c2o, o2h, h2c, h2o)
	}
	for i := range hooked {
		if got, want := hooked[i].Load(), b.Transitions(State(i/numStates), State(i%numStates)); got != want {
			t.Fatalf("hook saw %d %v->%v transitions, counter %d", got, State(i/numStates), State(i%numStates), want)
		}
	}
	// Entered minus left is 1 for the current state, 0 for the others; Closed starts entered.
	final := b.word.Load() // no clock argument: the raw state, without a lazy transition
	is := func(s State) uint64 {
		if stateOf(final) == s {
			return 1
		}
		return 0
	}
	if 1+h2c-c2o != is(Closed) || c2o+h2o-o2h != is(Open) || o2h-h2c-h2o != is(HalfOpen) {
		t.Fatalf("transitions are not one path ending in %v: c2o %d o2h %d h2c %d h2o %d",
			stateOf(final), c2o, o2h, h2c, h2o)
	}
}
