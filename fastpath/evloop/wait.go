package evloop

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
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
// The price: an idle loop wakes every 9 ms (about 110 times a second), and each Gosched
// wakes a spinning thread for the spare P (two futex calls). Before this (sessions 4-9), a
// loop polled epoll_wait without a timeout and, finding nothing, parked in Go's netpoller on
// the epoll descriptor: per wake-up from idle an empty poll, the runtime's netpoll calls
// (1.55 epoll_pwait per request on the open loop at 2,000 req/s) and a pass through the
// scheduler (futex wake-ups of an M, netpoll(0) in findRunnable). docs/benchmarks.md §1,
// "Session 10", measures the two.
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
	now := monotonic()
	if now-l.lastYield >= yieldAfter {
		runtime.Gosched()
		now = monotonic()
		l.lastYield = now
	}
	timeout := int64(0)
	if len(l.again) == 0 {
		timeout = l.lastYield + blockUntil - now
		if next := l.timers.next(); next != 0 {
			timeout = min(timeout, max(next-now, 0))
		}
	}
	n, errno := l.epollWait(timeout)
	if errno != 0 && errno != unix.EINTR {
		return 0, errno
	}
	return n, nil
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
