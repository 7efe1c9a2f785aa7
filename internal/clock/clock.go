package clock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// Nanos is the monotonic time in nanoseconds from a fixed origin: the unit of the
	// request path's stamps (Real.Nanos is the package function Nanos).
	Nanos() int64
	// NewTimer returns a timer that fires once after d; d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
	// After returns a channel that receives the time once d has passed (NewTimer(d).C()).
	After(d time.Duration) <-chan time.Time
	// NewTicker returns a ticker that fires every d (d > 0). Like time.Ticker, a tick the
	// reader has not taken yet is not queued behind another: a slow reader skips ticks.
	NewTicker(d time.Duration) Ticker
	// WithDeadline returns a copy of parent that ends when this clock reaches d, with the
	// cause and error context.DeadlineExceeded, or when cancel is called (context.Canceled).
	// Its Deadline is d carried over to the system clock: what a deadline sent on the wire
	// (grpc-timeout) is computed from.
	WithDeadline(parent context.Context, d time.Time) (ctx context.Context, cancel context.CancelFunc)
}

// Ticker is the part of time.Ticker the control plane uses.
type Ticker interface {
	C() <-chan time.Time
	// Stop turns the ticker off; no tick is sent after it returns.
	Stop()
}

// Timer is the part of time.Timer the control plane uses.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped a pending timer.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Nanos returns Nanos().
func (Real) Nanos() int64 { return Nanos() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTicker returns a time.Ticker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// WithDeadline is context.WithDeadline.
func (Real) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(parent, d)
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// start anchors Nanos: time.Since reads the monotonic clock.
var start = time.Now()

// Nanos returns monotonic nanoseconds since the process started: never negative, never going
// back, and cheap enough for the request path.
func Nanos() int64 { return int64(time.Since(start)) }

// Fake is a Clock that moves only when the test advances it. It starts at FakeEpoch.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	origin  time.Time
	timers  map[*fakeTimer]bool
	tickers map[*fakeTicker]bool
}

// FakeEpoch is where a NewFake clock starts (2023-11-14 22:13:20 UTC): a fixed time, so that
// runs are reproducible.
var FakeEpoch = time.Unix(1_700_000_000, 0)

// NewFake returns a fake clock at FakeEpoch.
func NewFake() *Fake { return NewFakeAt(FakeEpoch) }

// NewFakeAt returns a fake clock at t.
func NewFakeAt(t time.Time) *Fake {
	return &Fake{now: t, origin: t, timers: map[*fakeTimer]bool{}, tickers: map[*fakeTicker]bool{}}
}

var _ Clock = (*Fake)(nil)

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Nanos returns the fake time since the clock was made, in nanoseconds: it moves with
// Advance and Set (a Set back moves it back, for tests of what a clock step does).
func (c *Fake) Nanos() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.now.Sub(c.origin))
}

// NewTimer returns a timer that fires when Advance reaches now+d.
func (c *Fake) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timerAt(c.now.Add(d))
}

// timerAt returns a timer that fires when the clock reaches at; c.mu is held.
func (c *Fake) timerAt(at time.Time) *fakeTimer {
	t := &fakeTimer{c: c, at: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.ch <- c.now
	} else {
		c.timers[t] = true
	}
	return t
}

// After returns NewTimer(d).C().
func (c *Fake) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTicker returns a ticker that fires each time Advance passes another multiple of d
// since now; an Advance over several periods sends one tick, as a slow reader of a
// time.Ticker gets.
func (c *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{c: c, next: c.now.Add(d), every: d, ch: make(chan time.Time, 1)}
	c.tickers[t] = true
	return t
}

// WithDeadline returns a copy of parent that ends when Advance reaches d; its Deadline is
// the system clock's now plus the fake time left. A goroutine waits for the end; it leaves,
// and stops its timer, when the context ends.
func (c *Fake) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	ctx, end := context.WithCancelCause(parent)
	c.mu.Lock()
	left := d.Sub(c.now)
	t := c.timerAt(d)
	c.mu.Unlock()
	go func() {
		select {
		case <-t.C():
			end(context.DeadlineExceeded)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return &fakeDeadline{ctx, time.Now().Add(left)}, func() { end(context.Canceled) }
}

// fakeDeadline is a cancelable context that reports a deadline, and the error of one passed.
type fakeDeadline struct {
	context.Context
	deadline time.Time
}

func (f *fakeDeadline) Deadline() (time.Time, bool) { return f.deadline, true }

func (f *fakeDeadline) Err() error {
	err := f.Context.Err()
	if err != nil && errors.Is(context.Cause(f.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// Advance moves the clock by d and fires the timers and tickers that fall due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
		}
	}
	for t := range c.tickers {
		if t.next.After(c.now) {
			continue
		}
		select {
		case t.ch <- c.now:
		default: // the last tick is still unread: this one is dropped, as time.Ticker does
		}
		for !t.next.After(c.now) {
			t.next = t.next.Add(t.every)
		}
	}
}

// Set moves the clock to t (forward or back) and fires the timers that fall due: for tests of
// what a clock step does.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	d := t.Sub(c.now)
	c.mu.Unlock()
	c.Advance(d)
}

// Waiting returns how many timers have not fired and were not stopped, and tickers that
// were not stopped.
func (c *Fake) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers) + len(c.tickers)
}

type fakeTimer struct {
	c  *Fake
	at time.Time
	ch chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	active := t.c.timers[t]
	delete(t.c.timers, t)
	return active
}

type fakeTicker struct {
	c     *Fake
	next  time.Time
	every time.Duration
	ch    chan time.Time
}

func (t *fakeTicker) C() <-chan time.Time { return t.ch }

func (t *fakeTicker) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.tickers, t)
}
