package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// zmq4 allocates every frame at the size its header claims, before reading it, and keeps
// reading the frames of a message for as long as they say more follow. The consumers therefore
// dial through boundedTCP, which watches the ZMTP framing of what it reads and fails the
// connection at the header of a frame (or message) larger than the limit, before zmq4 sees it.
// The limit travels in the dial address, as "host:port/limit".

const (
	transportName = "smgkv"
	zmtpGreeting  = 64 // ZMTP 3.x: signature, version, mechanism, as-server, filler
	flagMore      = 0x01
	flagLong      = 0x02
	flagCommand   = 0x04
)

var registerOnce sync.Once

func registerTransport() {
	registerOnce.Do(func() {
		if err := zmq4.RegisterTransport(transportName, boundedTCP{}); err != nil {
			panic(err) // only a second registration of the same name can fail
		}
	})
}

// ErrFrameTooLarge: a publisher announced a frame or message above Config.MaxMessageBytes.
var ErrFrameTooLarge = errors.New("KV event message larger than the limit")

// endpoint returns the zmq4 endpoint that dials tcp host:port through boundedTCP.
func boundedEndpoint(hostPort string, limit int, handshake time.Duration) string {
	return fmt.Sprintf("%s://%s/%d/%d", transportName, hostPort, limit, handshake.Milliseconds())
}

type boundedTCP struct{}

func (boundedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	var hostPort string
	var limit, handshakeMS int64
	for i := len(addr) - 1; i >= 0; i-- { // host:port/limit/handshake
		if addr[i] == '/' {
			if _, err := fmt.Sscanf(addr[i+1:], "%d", &handshakeMS); err != nil {
				return nil, fmt.Errorf("cannot parse handshake timeout in %q", addr)
			}
			rest := addr[:i]
			j := len(rest) - 1
			for j >= 0 && rest[j] != '/' {
				j--
			}
			if j < 0 {
				return nil, fmt.Errorf("cannot parse %q: want host:port/limit/handshake-ms", addr)
			}
			if _, err := fmt.Sscanf(rest[j+1:], "%d", &limit); err != nil {
				return nil, fmt.Errorf("cannot parse limit in %q", addr)
			}
			hostPort = rest[:j]
			break
		}
	}
	if hostPort == "" {
		return nil, fmt.Errorf("cannot parse %q: want host:port/limit/handshake-ms", addr)
	}
	c, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return nil, err
	}
	// The handshake (greeting and READY) must arrive in time: a peer that accepts and says
	// nothing would otherwise hold the dial forever.
	hs := time.Duration(handshakeMS) * time.Millisecond
	if hs > 0 {
		_ = c.SetReadDeadline(time.Now().Add(hs))
	}
	return &limitConn{Conn: c, limit: uint64(limit), greeting: zmtpGreeting, handshake: hs > 0}, nil
}

func (boundedTCP) Listen(context.Context, string) (net.Listener, error) {
	return nil, errors.New("the KV-event transport only dials")
}

func (boundedTCP) Addr(ep string) (string, error) { return ep, nil }

// limitConn follows the ZMTP framing of the bytes read: greeting, then frames of a flags byte,
// a 1- or 8-byte size and the body.
type limitConn struct {
	net.Conn
	limit     uint64
	greeting  int // greeting bytes still to pass
	hdr       [9]byte
	hdrN      int    // header bytes seen of the current frame
	body      uint64 // body bytes still to pass
	msg       uint64 // bytes of the current message's frames so far
	handshake bool   // the read deadline of the handshake is still set
	err       error
}

func (c *limitConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if ferr := c.follow(p[:n]); ferr != nil {
		c.err = ferr
		_ = c.Conn.Close()
		return 0, ferr
	}
	return n, err
}

func (c *limitConn) follow(b []byte) error {
	for len(b) > 0 {
		switch {
		case c.greeting > 0:
			k := min(c.greeting, len(b))
			c.greeting -= k
			b = b[k:]
		case c.body > 0:
			k := uint64(len(b))
			if k > c.body {
				k = c.body
			}
			c.body -= k
			b = b[k:]
		default:
			c.hdr[c.hdrN] = b[0]
			c.hdrN++
			b = b[1:]
			flags := c.hdr[0]
			need := 2
			if flags&flagLong != 0 {
				need = 9
			}
			if c.hdrN < need {
				continue
			}
			var size uint64
			if need == 2 {
				size = uint64(c.hdr[1])
			} else {
				size = binary.BigEndian.Uint64(c.hdr[1:9])
			}
			c.hdrN = 0
			if flags&flagCommand != 0 {
				if size > 1<<16 {
					return fmt.Errorf("%w: a ZMTP command of %d bytes", ErrFrameTooLarge, size)
				}
				if c.handshake { // READY: the handshake is over
					_ = c.Conn.SetReadDeadline(time.Time{})
					c.handshake = false
				}
				c.body = size
				continue
			}
			if size > c.limit || c.msg+size > c.limit {
				return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, c.msg+size, c.limit)
			}
			c.msg += size
			if flags&flagMore == 0 {
				c.msg = 0
			}
			c.body = size
		}
	}
	return nil
}
