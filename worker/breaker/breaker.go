package breaker

import (
	"sync/atomic"
	"time"
)

// The state word packs everything a transition must change at once, so that every
// transition is one compare-and-swap and no reader ever sees half of one:
//
//	bits  0-1   State
//	bits  2-9   half-open probes in flight
//	bits 10-17  half-open successes so far
//	bits 18-63  since: when the state was entered, in milliseconds of the caller's clock
//
// For Open, since is when it opened; the breaker turns HalfOpen at since+Timeout and stamps
// the half-open episode with exactly that time, so racing callers compute the same word.
// State and since together (the word without its counters) identify a half-open episode:
// the next one starts at least Timeout (>= 1 ms) later.
const (
	stateMask  = 1<<2 - 1
	probeShift = 2
	succShift  = 10
	sinceShift = 18
	fieldMask  = 1<<8 - 1
	// episodeMask keeps state and since, drops the counters.
	episodeMask = ^uint64(fieldMask<<probeShift | fieldMask<<succShift)
	// maxSinceMs is the largest stampable time, about 2,200 years of milliseconds.
	maxSinceMs = 1<<(64-sinceShift) - 1
)

func pack(s State, sinceMs uint64) uint64 { return sinceMs<<sinceShift | uint64(s) }

func stateOf(w uint64) State      { return State(w & stateMask) }
func probesOf(w uint64) uint64    { return w >> probeShift & fieldMask }
func successesOf(w uint64) uint64 { return w >> succShift & fieldMask }
func sinceOf(w uint64) uint64     { return w >> sinceShift }
func episodeOf(w uint64) uint64   { return w & episodeMask }

// nanos clamps a caller's time to the non-negative range the breaker computes in.
func nanos(now int64) uint64 { return uint64(max(now, 0)) }

// millis converts a caller's time to the state word's since field.
func millis(now int64) uint64 { return min(nanos(now)/uint64(time.Millisecond), maxSinceMs) }

// bucketOf returns the failure-window bucket that now falls in.
func bucketOf(now int64, s *settings) uint64 { return nanos(now) / s.bucketNs }

// Breaker is one worker's circuit breaker. The zero value is a closed breaker with
// DefaultConfig; Init configures it. It must not be copied after first use.
//
// Times are int64 nanoseconds of a monotonic clock with a fixed origin, passed by the caller
// (Config.Clock's Nanos); they must not be negative. AvailableNow and Now read Config.Clock.
type Breaker struct {
	word        atomic.Uint64
	faults      window
	transitions [numStates * numStates]atomic.Uint64
	s           *settings
}

// Init configures the breaker with cfg and an optional hook called after every transition,
// by the goroutine that made it (possibly a request's: keep the hook cheap, e.g. a counter
// increment). Call Init before the breaker is shared; it returns cfg's validation error.
func (b *Breaker) Init(cfg Config, onTransition func(from, to State)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	b.s = newSettings(cfg, onTransition)
	return nil
}

func (b *Breaker) settings() *settings {
	if s := b.s; s != nil {
		return s
	}
	return defaultSettings
}

// current returns the state word at now, first turning an Open breaker whose Timeout has
// passed HalfOpen.
func (b *Breaker) current(s *settings, now int64) uint64 {
	for {
		w := b.word.Load()
		if stateOf(w) != Open {
			return w
		}
		due := sinceOf(w) + s.timeoutMs
		if millis(now) < due {
			return w
		}
		half := pack(HalfOpen, min(due, maxSinceMs))
		if b.word.CompareAndSwap(w, half) {
			b.transitioned(s, Open, HalfOpen)
			return half
		}
	}
}

// State returns the breaker's state at now. A disabled breaker is always Closed.
func (b *Breaker) State(now int64) State {
	s := b.settings()
	if s.disabled {
		return Closed
	}
	return stateOf(b.current(s, now))
}

// Available reports whether TryAcquire would admit a request now, without admitting one:
// policies call it on every candidate. Closed: true; Open: false; HalfOpen: while a probe
// slot is free.
func (b *Breaker) Available(now int64) bool {
	s := b.settings()
	if s.disabled {
		return true
	}
	w := b.current(s, now)
	switch stateOf(w) {
	case Closed:
		return true
	case HalfOpen:
		return probesOf(w) < s.maxProbes
	}
	return false
}

// TryAcquire admits one request to the worker, or refuses it. The gateway calls it once for
// the worker it picked and, when admitted, calls Record with the permit exactly once when the
// request ends. A HalfOpen breaker admits at most MaxHalfOpenProbes requests at a time.
func (b *Breaker) TryAcquire(now int64) (Permit, bool) {
	s := b.settings()
	if s.disabled {
		return Permit{}, true
	}
	for {
		w := b.current(s, now)
		switch stateOf(w) {
		case Closed:
			return Permit{}, true
		case Open:
			return Permit{}, false
		}
		if probesOf(w) >= s.maxProbes {
			return Permit{}, false
		}
		if b.word.CompareAndSwap(w, w+1<<probeShift) {
			return Permit{episode: episodeOf(w)}, true
		}
	}
}

// Record reports how a request admitted with p ended. See the package documentation for
// the rules; in short:
//   - Closed: a Fault counts toward FailureThreshold within Window; Success and ClientError
//     forget the counted faults.
//   - HalfOpen, for a probe of the current episode: a Fault reopens; Success and ClientError
//     count toward SuccessThreshold, which closes; every outcome frees the probe's slot.
//   - Otherwise it is ignored: a probe of an ended episode, or a request admitted while
//     Closed that ends while Open or HalfOpen, says nothing the current state has not
//     decided since.
func (b *Breaker) Record(p Permit, o Outcome, now int64) {
	s := b.settings()
	if s.disabled {
		return
	}
	if p.episode != 0 {
		b.recordProbe(s, p, o, now)
		return
	}
	w := b.word.Load()
	if stateOf(w) != Closed {
		return
	}
	switch o {
	case Success, ClientError:
		if b.faults.dirty.Load() {
			b.faults.forget()
		}
	case Fault:
		if b.faults.add(bucketOf(now, s)) >= s.failureThreshold {
			if b.word.CompareAndSwap(w, pack(Open, millis(now))) {
				b.transitioned(s, Closed, Open)
			}
		}
	}
}

func (b *Breaker) recordProbe(s *settings, p Permit, o Outcome, now int64) {
	for {
		w := b.word.Load()
		if episodeOf(w) != p.episode {
			return // its episode ended; the slot went with it
		}
		var next uint64
		var to State
		switch o {
		case Fault:
			next, to = pack(Open, millis(now)), Open
		case Success, ClientError:
			if successesOf(w)+1 >= s.successThreshold {
				next, to = pack(Closed, millis(now)), Closed
			} else {
				next, to = w-1<<probeShift+1<<succShift, HalfOpen
			}
		default:
			next, to = w-1<<probeShift, HalfOpen
		}
		if !b.word.CompareAndSwap(w, next) {
			continue
		}
		if to == Closed {
			b.faults.forget() // closed starts with an empty window
		}
		if to != HalfOpen {
			b.transitioned(s, HalfOpen, to)
		}
		return
	}
}

func (b *Breaker) transitioned(s *settings, from, to State) {
	b.transitions[int(from)*numStates+int(to)].Add(1)
	if s.onTransition != nil {
		s.onTransition(from, to)
	}
}

// Transitions returns how many times the breaker went from one state to another.
func (b *Breaker) Transitions(from, to State) uint64 {
	if from >= numStates || to >= numStates {
		return 0
	}
	return b.transitions[int(from)*numStates+int(to)].Load()
}

// Stats is a breaker's state for the admin API and tests.
type Stats struct {
	State State
	// Faults counted toward FailureThreshold (Closed only).
	Faults int
	// Probes in flight and successful probes so far (HalfOpen only).
	Probes, Successes int
}

// Stats returns the breaker's state at now. Its fields are read one after the other, so under
// concurrent use they may not describe a single instant.
func (b *Breaker) Stats(now int64) Stats {
	s := b.settings()
	if s.disabled {
		return Stats{State: Closed}
	}
	w := b.current(s, now)
	st := Stats{State: stateOf(w), Probes: int(probesOf(w)), Successes: int(successesOf(w))}
	if st.State == Closed {
		st.Faults = int(b.faults.count(bucketOf(now, s)))
	}
	return st
}

// Closed reports whether the breaker is closed, as the state word says now: one atomic load,
// and unlike State it never moves an Open breaker whose timeout has passed to HalfOpen.
func (b *Breaker) Closed() bool { return stateOf(b.word.Load()) == Closed }

// AvailableNow is Available at the current time, reading the clock only when the breaker is
// not closed: policies call it on every candidate of a scan, and a closed breaker (the common
// case) then costs one atomic load.
func (b *Breaker) AvailableNow() bool {
	if stateOf(b.word.Load()) == Closed {
		return true
	}
	return b.Available(b.Now())
}

// Now reads the breaker's clock (Config.Clock).
func (b *Breaker) Now() int64 { return b.settings().clock.Nanos() }
