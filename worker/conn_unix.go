//go:build unix

package worker

import (
	"net"
	"syscall"
)

// clientGone reports whether the peer of c closed or reset the connection. It peeks without
// waiting and reads nothing: pending bytes (a pipelined request) say the client is there.
func clientGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		gone = (err == nil && n == 0) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR)
	})
	return gone
}
