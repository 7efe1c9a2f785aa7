package evloop

import "testing"

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
	}
}
