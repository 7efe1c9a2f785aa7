//go:build !unix

package worker

import "net"

// clientGone cannot peek at a connection here: a client's departure is not seen.
func clientGone(net.Conn) bool { return false }
