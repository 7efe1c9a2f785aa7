package evloop

import (
	"fmt"
	"runtime"
	"testing"
)

// TestWaitWithoutEpollPwait2: on a kernel without epoll_pwait2 (before Linux 5.11) the loops
// wait in epoll_pwait, their timeouts rounded up to milliseconds: requests are served and
// the timers (an idle connection's, here) still fire.
func TestWaitWithoutEpollPwait2(t *testing.T) {
	was := noPwait2.Load()
	noPwait2.Store(true)
	t.Cleanup(func() { noPwait2.Store(was) })
	t.Run("round trips", TestProxyHeldRoundTrips)
	t.Run("idle timeout", TestIdleTimeoutAfterKeepAliveTraffic)
}

// TestSchedulerProcs: a P per loop and one for the process's other goroutines (wait.go).
func TestSchedulerProcs(t *testing.T) {
	for loops, want := range map[int]int{1: 2, 2: 3, 8: 9} {
		if got := SchedulerProcs(loops); got != want {
			t.Errorf("SchedulerProcs(%d) = %d, want %d", loops, got, want)
		}
		if spareP(want-1, loops) || !spareP(want, loops) {
			t.Errorf("spareP: %d loops need %d Ps to wait in the kernel", loops, want)
		}
	}
}

// TestLoopsParkWithoutASpareP: a loop waits in the kernel only when the process leaves a P
// for everything else; with GOMAXPROCS at most the loops (testing.AllocsPerRun runs at 1) it
// parks in Go's netpoller instead, so that the goroutines it serves are not held up until
// sysmon takes its P. Requests are served either way.
func TestLoopsParkWithoutASpareP(t *testing.T) {
	const loops = 2 // TestProxyHeldRoundTrips's
	for _, c := range []struct {
		procs int
		parks bool
	}{{loops, true}, {SchedulerProcs(loops), false}} {
		t.Run(fmt.Sprint("GOMAXPROCS ", c.procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			before := parkedWaits.Load()
			TestProxyHeldRoundTrips(t)
			if parked := parkedWaits.Load() > before; parked != c.parks {
				t.Fatalf("loops parked: %v, want %v (loops running in the process: %d)", parked, c.parks, liveLoops.Load())
			}
		})
	}
}
