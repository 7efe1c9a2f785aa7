package evloop

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The loops' per-request system calls (reads and writes of non-blocking sockets, epoll_ctl)
// are made with RawSyscall, not Syscall: none of them can block, and Syscall's
// entersyscall/exitsyscall pair costs more than the bookkeeping it buys. Above all,
// entersyscall wakes the runtime's sysmon whenever sysmon sleeps because every P was idle,
// which on a loop that parked between events (sessions 4-9) was nearly every wake-up: sysmon
// then polled in 20 µs nanosleeps until the loop parked again. Only the blocking wait is a
// Syscall (wait.go). Measured on paced SSE (256 streams, an event
// every 20 ms per stream, one core): sysmon's nanosleep and futex calls and the context
// switches they cause were about a sixth of the gateway's CPU (docs/benchmarks-history.md).
//
// Every call returns the raw errno (0 for success) rather than an error, so that nothing is
// boxed on the hot path and callers compare with unix.EAGAIN as before.

var zeroBuf byte

// bufPtr is the address of p's first byte, or of a zero byte when p is empty (the kernel
// must not be given a nil pointer with a zero length on every architecture).
func bufPtr(p []byte) unsafe.Pointer {
	if len(p) == 0 {
		return unsafe.Pointer(&zeroBuf)
	}
	return unsafe.Pointer(&p[0])
}

// rawRead is read(2) on a non-blocking descriptor.
func rawRead(fd int, p []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(bufPtr(p)), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), 0
}

// rawWrite is write(2) on a non-blocking descriptor.
func rawWrite(fd int, p []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(bufPtr(p)), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), 0
}

// writeOut writes out[*sent:] to the non-blocking fd once and advances *sent by what the
// socket took. A full socket (EAGAIN) or an interrupted write (EINTR) is no error: the rest
// waits for the next writable event.
func writeOut(fd int, out []byte, sent *int) unix.Errno {
	if len(out) <= *sent {
		return 0
	}
	n, err := rawWrite(fd, out[*sent:])
	if err != 0 && err != unix.EAGAIN && err != unix.EINTR {
		return err
	}
	if n > 0 {
		*sent += n
	}
	return 0
}

// rawEpollCtl is epoll_ctl(2), which never blocks.
func rawEpollCtl(epfd, op, fd int, ev *unix.EpollEvent) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	return e
}
