package grpcworker

import (
	"fmt"
	"strings"
	"time"
)

// Dialect is the gRPC service a worker serves.
type Dialect uint8

// The dialects: SGLang's sglang.grpc.scheduler.SglangScheduler and vLLM's
// vllm.grpc.engine.VllmEngine.
const (
	SGLang Dialect = iota + 1
	VLLM
)

// String returns "sglang" or "vllm" (the worker spec's runtime_type values).
func (d Dialect) String() string {
	switch d {
	case SGLang:
		return "sglang"
	case VLLM:
		return "vllm"
	}
	return fmt.Sprintf("Dialect(%d)", uint8(d))
}

// ParseDialect reads "sglang" or "vllm" (any case).
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "sglang":
		return SGLang, nil
	case "vllm":
		return VLLM, nil
	}
	return 0, fmt.Errorf("unknown gRPC dialect %q: use sglang or vllm", s)
}

// Config bounds one worker's client. TLS is not supported yet: connections are plaintext
// HTTP/2 (h2c), as both engines serve by default.
type Config struct {
	// DialTimeout bounds Dial's wait for every connection of the pool to become ready, and
	// each later reconnection attempt. Default 5 s.
	DialTimeout time.Duration
	// Conns is the number of HTTP/2 connections (grpc.ClientConn) in the worker's pool; calls
	// are spread over them round robin. One connection multiplexes every stream; more help
	// only when the engine's MAX_CONCURRENT_STREAMS per connection is the limit. Default 1,
	// at most MaxConns.
	Conns int
	// MaxStreams bounds the Generate streams open at once over the whole pool; one more fails
	// at once with ErrStreamLimit (class Backpressure) rather than queueing inside grpc-go,
	// so the gateway can pick another worker. Unary calls (Abort, HealthCheck, GetLoads...)
	// are not counted, so an Abort is never stuck behind the streams it is meant to end.
	// Default 1024.
	MaxStreams int
	// KeepaliveTime is the time without activity after which the client pings the engine
	// (only while streams are open), and KeepaliveTimeout how long it waits for the answer
	// before closing the connection: a vanished engine ends its streams with UNAVAILABLE
	// instead of leaving them hanging. Default 5 min and 20 s: gRPC servers (grpc-go and
	// the C core under Python's grpcio) by default answer pings more often than every 5 min
	// on a connection they send nothing on with GOAWAY, which would end every stream of the
	// connection, a silent non-streamed generation included. Lower it only for engines that
	// permit it; grpc-go raises anything under 10 s to 10 s.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxRecvMsgSize and MaxSendMsgSize bound one message in bytes (grpc-go's default 4 MiB
	// is too small for a 1M-token prompt or logprob-heavy answers). Default 64 MiB each.
	MaxRecvMsgSize int
	MaxSendMsgSize int
	// ReconnectMaxBackoff caps the delay between reconnection attempts after a connection
	// is lost (grpc-go's own cap is 120 s, far too long for a restarted engine). Default 5 s.
	ReconnectMaxBackoff time.Duration
	// AbortTimeout bounds each Abort sent for a canceled stream; it runs detached from the
	// canceled context. Default 5 s.
	AbortTimeout time.Duration
	// StreamWindow and ConnWindow are the HTTP/2 flow-control windows the client grants the
	// engine per stream and per connection, in bytes. Fixed windows turn off grpc-go's
	// bandwidth-delay probing, whose pings and window updates cost a write per few tokens
	// on a token stream (a third of the client's writes on a 128-token answer). Defaults
	// 1 MiB and 16 MiB: far above a token stream's bytes in flight; at least 64 KiB each.
	StreamWindow int32
	ConnWindow   int32
}

// Defaults of Config.
const (
	DefaultDialTimeout         = 5 * time.Second
	DefaultConns               = 1
	MaxConns                   = 64
	DefaultMaxStreams          = 1024
	DefaultKeepaliveTime       = 5 * time.Minute
	DefaultKeepaliveTimeout    = 20 * time.Second
	DefaultMaxMsgSize          = 64 << 20
	DefaultReconnectMaxBackoff = 5 * time.Second
	DefaultAbortTimeout        = 5 * time.Second
	DefaultStreamWindow        = 1 << 20
	DefaultConnWindow          = 16 << 20
)

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DialTimeout:         DefaultDialTimeout,
		Conns:               DefaultConns,
		MaxStreams:          DefaultMaxStreams,
		KeepaliveTime:       DefaultKeepaliveTime,
		KeepaliveTimeout:    DefaultKeepaliveTimeout,
		MaxRecvMsgSize:      DefaultMaxMsgSize,
		MaxSendMsgSize:      DefaultMaxMsgSize,
		ReconnectMaxBackoff: DefaultReconnectMaxBackoff,
		AbortTimeout:        DefaultAbortTimeout,
		StreamWindow:        DefaultStreamWindow,
		ConnWindow:          DefaultConnWindow,
	}
}

// Validate reports a setting out of range, saying how to fix it.
func (c Config) Validate() error {
	switch {
	case c.DialTimeout <= 0:
		return fmt.Errorf("gRPC dial timeout is %v: give a positive duration (default %v)", c.DialTimeout, DefaultDialTimeout)
	case c.Conns < 1 || c.Conns > MaxConns:
		return fmt.Errorf("gRPC connections per worker is %d: give 1-%d (default %d)", c.Conns, MaxConns, DefaultConns)
	case c.MaxStreams < 1:
		return fmt.Errorf("gRPC max streams per worker is %d: give at least 1 (default %d)", c.MaxStreams, DefaultMaxStreams)
	case c.KeepaliveTime <= 0:
		return fmt.Errorf("gRPC keepalive time is %v: give a positive duration (default %v)", c.KeepaliveTime, DefaultKeepaliveTime)
	case c.KeepaliveTimeout <= 0:
		return fmt.Errorf("gRPC keepalive timeout is %v: give a positive duration (default %v)", c.KeepaliveTimeout, DefaultKeepaliveTimeout)
	case c.MaxRecvMsgSize < 1024 || c.MaxSendMsgSize < 1024:
		return fmt.Errorf("gRPC max message sizes are %d (receive) and %d (send) bytes: give at least 1024 each (default %d)", c.MaxRecvMsgSize, c.MaxSendMsgSize, DefaultMaxMsgSize)
	case c.ReconnectMaxBackoff <= 0:
		return fmt.Errorf("gRPC reconnect max backoff is %v: give a positive duration (default %v)", c.ReconnectMaxBackoff, DefaultReconnectMaxBackoff)
	case c.AbortTimeout <= 0:
		return fmt.Errorf("gRPC abort timeout is %v: give a positive duration (default %v)", c.AbortTimeout, DefaultAbortTimeout)
	case c.StreamWindow < 64<<10 || c.ConnWindow < 64<<10:
		return fmt.Errorf("gRPC flow-control windows are %d (stream) and %d (connection) bytes: give at least 65536 each (defaults %d and %d)", c.StreamWindow, c.ConnWindow, DefaultStreamWindow, DefaultConnWindow)
	}
	return nil
}
