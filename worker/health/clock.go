package health

import "time"

// Clock is the time source of the probe schedule, injected so that tests drive it.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d; d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of time.Timer the Checker uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// RealClock returns the system clock.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

func (r realTimer) Stop() bool { return r.t.Stop() }
