package clock

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestFakeFiresTimersWhenAdvancedPastThem(t *testing.T) {
	c := NewFake()
	t1, t2 := c.NewTimer(time.Second), c.After(3*time.Second)
	if !fired(c.After(0)) {
		t.Fatal("a zero timer did not fire at once")
	}
	c.Advance(999 * time.Millisecond)
	if fired(t1.C()) || c.Waiting() != 2 {
		t.Fatalf("fired early (waiting %d)", c.Waiting())
	}
	c.Advance(time.Millisecond)
	if !fired(t1.C()) || fired(t2) || c.Waiting() != 1 {
		t.Fatalf("at 1 s: want the 1 s timer fired, the 3 s one waiting (waiting %d)", c.Waiting())
	}
	t3 := c.NewTimer(time.Second)
	if !t3.Stop() || t3.Stop() {
		t.Fatal("Stop of a pending timer must report true once")
	}
	c.Set(c.Now().Add(5 * time.Second))
	if !fired(t2) || fired(t3.C()) || c.Waiting() != 0 {
		t.Fatal("Set past the 3 s timer must fire it, and not the stopped one")
	}
	if got := c.Now().Sub(FakeEpoch); got != 6*time.Second {
		t.Fatalf("fake time moved %v, want 6s", got)
	}
}

func TestNanosIsMonotonic(t *testing.T) {
	a := Nanos()
	b := Nanos()
	if a < 0 || b < a {
		t.Fatalf("Nanos went from %d to %d", a, b)
	}
}

func TestFakeNanosFollowsItsTime(t *testing.T) {
	c := NewFakeAt(FakeEpoch.Add(time.Hour))
	if got := c.Nanos(); got != 0 {
		t.Fatalf("a new fake's Nanos is %d, want 0", got)
	}
	c.Advance(1500 * time.Millisecond)
	if got := c.Nanos(); got != int64(1500*time.Millisecond) {
		t.Fatalf("after Advance(1.5s) Nanos is %d, want %d", got, int64(1500*time.Millisecond))
	}
	c.Set(c.Now().Add(-time.Second))
	if got := c.Nanos(); got != int64(500*time.Millisecond) {
		t.Fatalf("after a step back of 1s Nanos is %d, want %d", got, int64(500*time.Millisecond))
	}
	if a, b := (Real{}).Nanos(), Nanos(); a < 0 || b < a {
		t.Fatalf("Real.Nanos %d then Nanos %d: want the same monotonic clock", a, b)
	}
}

func TestRealTimerFires(t *testing.T) {
	var c Clock = Real{}
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	<-c.After(0)
}

// TestFakeTickerTicksEveryPeriod: a fake ticker fires each time Advance passes another
// period; an Advance over several periods, or a tick left unread, gives one tick (the
// reader of a time.Ticker gets the same), and a stopped ticker is silent.
func TestFakeTickerTicksEveryPeriod(t *testing.T) {
	c := NewFake()
	tk := c.NewTicker(time.Second)
	c.Advance(999 * time.Millisecond)
	if fired(tk.C()) {
		t.Fatal("ticked before its period")
	}
	c.Advance(time.Millisecond)
	if !fired(tk.C()) {
		t.Fatal("no tick after one period")
	}
	c.Advance(3500 * time.Millisecond) // periods 2, 3 and 4 pass: one tick
	if !fired(tk.C()) || fired(tk.C()) {
		t.Fatal("an Advance over three periods must give one tick")
	}
	c.Advance(500 * time.Millisecond) // period 5
	c.Advance(time.Second)            // period 6, while 5's tick is unread
	if !fired(tk.C()) || fired(tk.C()) {
		t.Fatal("an unread tick must not queue another")
	}
	if c.Waiting() != 1 {
		t.Fatalf("waiting %d with one ticker", c.Waiting())
	}
	tk.Stop()
	c.Advance(10 * time.Second)
	if fired(tk.C()) || c.Waiting() != 0 {
		t.Fatal("a stopped ticker ticked")
	}
}

func TestRealTickerTicks(t *testing.T) {
	var c Clock = Real{}
	tk := c.NewTicker(time.Millisecond)
	<-tk.C()
	<-tk.C()
	tk.Stop()
}

func TestNanosOfAndTimeOfAreInverse(t *testing.T) {
	now := time.Now()
	n := NanosOf(now)
	if n < 0 {
		t.Fatalf("NanosOf(now) = %d: before the process started", n)
	}
	if got := TimeOf(n); !got.Equal(now) {
		t.Fatalf("TimeOf(NanosOf(t)) = %v, want %v", got, now)
	}
	if d := NanosOf(now.Add(time.Second)) - n; d != int64(time.Second) {
		t.Fatalf("a second later is %d ns later on the Nanos scale", d)
	}
}

// A fake clock's deadline context ends when the clock passes the deadline, and only then; its
// Deadline is on the system clock (what grpc-timeout is computed from).
func TestFakeDeadlineEndsWhenTheClockPassesIt(t *testing.T) {
	c := NewFake()
	before := time.Now()
	ctx, cancel := c.WithDeadline(context.Background(), c.Now().Add(time.Hour))
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || d.Before(before.Add(time.Hour)) || d.After(time.Now().Add(time.Hour)) {
		t.Fatalf("Deadline %v %v, want the system clock's now plus an hour", d, ok)
	}
	c.Advance(time.Hour - 1)
	if ctx.Err() != nil {
		t.Fatalf("ended before the deadline: %v", ctx.Err())
	}
	c.Advance(1)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("err %v, cause %v; want DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
}

// Cancelling a fake clock's deadline context, or its parent, ends it as Canceled and stops
// its timer.
func TestFakeDeadlineCancels(t *testing.T) {
	c := NewFake()
	for _, byParent := range []bool{false, true} {
		parent, cancelParent := context.WithCancel(context.Background())
		ctx, cancel := c.WithDeadline(parent, c.Now().Add(time.Hour))
		if ctx.Err() != nil {
			t.Fatalf("ended before the deadline: %v", ctx.Err())
		}
		if byParent {
			cancelParent()
		} else {
			cancel()
		}
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("cancelled by the parent %v: err %v, want Canceled", byParent, ctx.Err())
		}
		for c.Waiting() != 0 { // the goroutine stops the timer once it sees the end
			runtime.Gosched()
		}
		cancel()
		cancelParent()
	}
}

// The real clock's deadline context is context.WithDeadline's: one already passed ends it.
func TestRealDeadlinePassed(t *testing.T) {
	ctx, cancel := Real{}.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", ctx.Err())
	}
}
