package worker

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// conn is a connection of a worker's HostClient (probes, load polls, the worker API's
// pass-through). It exists for TLS: the TLS client runs inside it, set up by wrapDial, and
// fasthttp leaves a connection with a Handshake method as it is.
type conn struct {
	net.Conn
}

// wrapDial makes every connection of a worker's HostClient a conn. For a worker behind TLS
// (tlsConfig set) the handshake runs at dial time, bounded by timeout, with the gateway's
// session cache and roots (workerTLSConfig).
func wrapDial(dial fasthttp.DialFunc, tlsConfig *tls.Config, timeout time.Duration) fasthttp.DialFunc {
	return func(addr string) (net.Conn, error) {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		if tlsConfig != nil {
			tc := tls.Client(c, tlsConfig)
			if err := handshake(tc, timeout); err != nil {
				_ = c.Close()
				return nil, err
			}
			c = tc
		}
		return &conn{Conn: c}, nil
	}
}

// Handshake tells fasthttp that the connection needs no TLS client on top: a TLS worker's
// is inside (wrapDial); a plain worker's HostClient does not ask.
func (c *conn) Handshake() error { return nil }

func handshake(tc *tls.Conn, timeout time.Duration) error {
	if err := tc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("cannot complete the TLS handshake with the worker: %w", err)
	}
	return tc.SetDeadline(time.Time{})
}
