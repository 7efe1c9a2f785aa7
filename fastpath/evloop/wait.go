package evloop

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/smg-go/smg/internal/clock"
)

// How a loop waits for events.
//
// A loop blocks in its own epoll_pwait2, the next timer as the timeout, as nginx and gnet
// wait: one system call per wake-up. It is an ordinary system call (Syscall6: entersyscall
// and exitsyscall, a few atomic operations when nothing else happens), so the Go scheduler
// knows the goroutine is in the kernel and may hand its P to other goroutines. It does that
// only when it has to, given two things:
//
//   - A spare P. The process runs with GOMAXPROCS Loops+1 (SchedulerProcs; cmd/smg raises
//     it itself), so the gateway's other goroutines (health checks, load polling, the admin
//     API, the bridge, timers, the GC) have a P while every loop sits in epoll_pwait2. The
//     runtime's sysmon does not take a P from a goroutine in a system call while another P
//     is idle and the P's run queue is empty, for up to 10 ms (runtime/proc.go, retake);
//     with work queued on it, it does, after 20 µs or more.
//   - A scheduler tick. sysmon preempts a goroutine that has not been through the scheduler
//     for 10 ms (forcePreemptNS), in a system call too: it signals the thread (SIGURG, which
//     ends the epoll_pwait2 with EINTR), takes the P, and then polls every 20 µs for a
//     millisecond. A loop that never parks would pay that every 10 ms. So a loop goes
//     through the scheduler (runtime.Gosched) once yieldAfter has passed since it last did,
//     and blocks no longer than until blockUntil after that: the scheduler's tick moves at
//     least every 9 ms plus one wake-up's work, and sysmon finds nothing to do.
//
// Without a spare P (GOMAXPROCS at most the process's loops: a test under
// testing.AllocsPerRun, which runs at GOMAXPROCS 1, or a program that embeds the loops and
// did not raise it), a loop blocked in the kernel keeps the P every other goroutine needs
// until sysmon takes it, and each hand-off between a loop and a goroutine of the process
// waits for sysmon: `go test -run DoesNotAllocate ./fastpath/` took 199 s, 3 s with the
// park (2-core machine). So a loop checks at each yield whether the process has
// a P to spare for it (liveLoops) and, if not, parks in Go's netpoller on its epoll
// descriptor instead (park), as the loops did before.
//
// The price: an idle loop wakes every 9 ms (about 110 times a second), and each Gosched
// wakes a spinning thread for the spare P (two futex calls). Before this, a
// loop polled epoll_wait without a timeout and, finding nothing, parked in Go's netpoller on
// the epoll descriptor: per wake-up from idle an empty poll, the runtime's netpoll calls
// (1.55 epoll_pwait per request on the open loop at 2,000 req/s) and a pass through the
// scheduler (futex wake-ups of an M, netpoll(0) in findRunnable). docs/benchmarks-history.md
// measures the two.
const (
	yieldAfter = 8_000_000 // ns
	blockUntil = 9_000_000 // ns
)

// SchedulerProcs is the GOMAXPROCS a process serving with loops event loops should run with:
// one P per loop, which sits in epoll_pwait2 while its loop waits, and one for everything
// else (see above).
func SchedulerProcs(loops int) int { return loops + 1 }

// wait returns the loop's next events, blocking until one comes or the next timer is due.
// Sockets queued to be read again (readAgain) make it look without waiting.
func (l *loop) wait() (int, error) {
	// The system's clock, not Config.Clock: the Go scheduler's ticks follow it whatever
	// clock the loops' own time (loop.now) runs on.
	now := clock.Nanos()
	if now-l.lastYield >= yieldAfter {
		runtime.Gosched()
		now = clock.Nanos()
		l.lastYield = now
		l.parks = !spareP(runtime.GOMAXPROCS(0), int(liveLoops.Load()))
	}
	if l.parks && len(l.again) == 0 {
		return l.park()
	}
	timeout := int64(0)
	if len(l.again) == 0 {
		timeout = l.lastYield + blockUntil - now
		if next := l.timers.next(); next != 0 {
			timeout = min(timeout, max(next-l.s.nanos(), 0))
		}
	}
	n, errno := l.epollWait(timeout)
	if errno != 0 && errno != unix.EINTR {
		return 0, errno
	}
	return n, nil
}

// liveLoops counts the loops running in the process, every Server's: each one waiting in
// epoll_pwait2 holds a P. parkedWaits counts the waits in the netpoller (park), for tests.
var liveLoops atomic.Int32
var parkedWaits atomic.Uint64

// spareP reports whether a process with gomaxprocs Ps running loops event loops leaves a P
// for everything else while every loop waits in the kernel (SchedulerProcs).
func spareP(gomaxprocs, loops int) bool { return gomaxprocs >= SchedulerProcs(loops) }

// park waits for the loop's next events in Go's netpoller, its P free meanwhile: an epoll
// instance is readable while it has events, so the loop parks on epfd as a file of the
// netpoller, with the next timer as the read deadline. pollOnce runs inside RawConn.Read,
// after the netpoller's readiness flag is reset, so an event arriving before the park is
// never missed; a parked wake-up costs the empty poll before the park and the one after it.
// epfd joins the netpoller at the first park only: registered, every event of the loop
// would also wake the runtime's own epoll_wait.
func (l *loop) park() (int, error) {
	if l.poll == nil {
		if err := l.pollable(); err != nil {
			return 0, err
		}
	}
	l.setParkDeadline()
	l.polled, l.pollErr = 0, 0
	parkedWaits.Add(1)
	if err := l.pollRaw.Read(l.pollFn); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	if l.pollErr != 0 && l.pollErr != unix.EINTR {
		return 0, l.pollErr
	}
	return l.polled, nil
}

// pollable makes epfd a file of Go's netpoller (non-blocking, so that os.NewFile registers it).
func (l *loop) pollable() error {
	if err := unix.SetNonblock(l.epfd, true); err != nil {
		return fmt.Errorf("evloop: epoll descriptor: %w", err)
	}
	l.poll = os.NewFile(uintptr(l.epfd), "evloop-epoll") // closeFDs closes it, and epfd with it
	raw, err := l.poll.SyscallConn()
	if err != nil {
		return fmt.Errorf("evloop: epoll descriptor: %w", err)
	}
	l.pollRaw, l.pollFn = raw, l.pollOnce
	return nil
}

// setParkDeadline makes the park end by the first timer. Moving a netpoller deadline takes a
// lock and a runtime timer update, and the first timer moves on nearly every request (an
// idle timer re-armed), so an earlier deadline still pending is kept: the loop then wakes
// once before its first timer is due, finds nothing due, and parks again with the new one.
func (l *loop) setParkDeadline() {
	want := l.timers.next()
	expired := l.parkedUntil != 0 && l.parkedUntil <= l.now
	switch {
	case !l.s.systemClock: // its deadline is set anew at every park (below)
	case want == 0 && !expired:
		return // no timer; a pending deadline only costs one early wake-up
	case want != 0 && l.parkedUntil != 0 && l.parkedUntil <= want && !expired:
		return
	}
	var d time.Time
	if want != 0 {
		d = l.s.timeOf(want)
		if !l.s.systemClock { // the kernel cannot see that clock move: look at it again soon
			d = time.Now().Add(min(time.Duration(want-l.s.nanos()), blockUntil))
		}
	}
	_ = l.poll.SetReadDeadline(d)
	l.parkedUntil = want
}

// pollOnce is park's read function (a method value made once: no allocation): the events
// ready now, without waiting.
func (l *loop) pollOnce(uintptr) bool {
	l.polled, l.pollErr = l.epollWait(0)
	return l.polled > 0 || (l.pollErr != 0 && l.pollErr != unix.EINTR)
}

// noPwait2 is set once epoll_pwait2 answered ENOSYS (Linux before 5.11): loops then wait in
// epoll_pwait, whose timeout is in milliseconds (rounded up: a timer never fires early).
var noPwait2 atomic.Bool

// epollWait is epoll_pwait2 with a timeout of timeout ns: 0 polls (a raw system call, which
// cannot block); anything else blocks, as a system call the scheduler knows of.
func (l *loop) epollWait(timeout int64) (int, unix.Errno) {
	ev := uintptr(unsafe.Pointer(&l.events[0]))
	if timeout <= 0 {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), ev, uintptr(len(l.events)), 0, 0, 0)
		return waitResult(n, e)
	}
	if !noPwait2.Load() {
		l.waitTS = unix.NsecToTimespec(timeout)
		n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(l.epfd), ev, uintptr(len(l.events)), uintptr(unsafe.Pointer(&l.waitTS)), 0, 0)
		if e != unix.ENOSYS {
			return waitResult(n, e)
		}
		noPwait2.Store(true)
	}
	ms := (timeout + 999_999) / 1_000_000
	n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), ev, uintptr(len(l.events)), uintptr(ms), 0, 0)
	return waitResult(n, e)
}

func waitResult(n uintptr, e unix.Errno) (int, unix.Errno) {
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
