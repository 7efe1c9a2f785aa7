package kvevents

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Sink receives one worker's (or DP rank's) batches in sequence order from one goroutine.
type Sink interface {
	// Apply applies a decoded batch. The batch and its slices are reused once Apply returns.
	Apply(b *Batch)
	// Clear drops everything the worker holds: its engine restarted, or events were lost
	// that cannot be replayed.
	Clear()
}

// ZMQConfig configures the ZMQ consumer of one worker.
type ZMQConfig struct {
	// Endpoint is the engine's PUB socket for DP rank 0, "tcp://host:port" (vLLM's and SGLang's
	// --kv-events-config endpoint, with the engine's host for "*"). Required.
	Endpoint string
	// ReplayEndpoint is the engine's ROUTER replay socket for rank 0, "tcp://host:port"; empty
	// when the engine runs without one (then a gap clears the worker's blocks).
	ReplayEndpoint string
	// DPRanks is the engine's data-parallel size: rank r publishes on the endpoints' ports + r.
	// Default 1.
	DPRanks int
	// Topic is the subscription prefix; "" (the engines' default topic) takes every message.
	Topic string
	// MaxMessageBytes bounds one message (all its frames): a larger one closes the connection
	// before it is read. Default 8 MiB, about 140,000 blocks of 16 tokens in one batch.
	MaxMessageBytes int
	// IdleTimeout drops a connection that delivered nothing for this long and dials again
	// (replaying what was missed): a dead publisher is noticed. Default 60 s.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the ZMTP handshake of a dial. Default 5 s.
	HandshakeTimeout time.Duration
	// ReplayTimeout bounds one replay request, from asking to the end marker. Default 5 s.
	ReplayTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between failed dials; it doubles from Min to
	// Max and returns to Min once a message arrives. Defaults 100 ms and 10 s.
	BackoffMin, BackoffMax time.Duration
}

// DefaultZMQConfig returns the defaults, without an endpoint.
func DefaultZMQConfig() ZMQConfig {
	return ZMQConfig{
		DPRanks:          1,
		MaxMessageBytes:  8 << 20,
		IdleTimeout:      60 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		ReplayTimeout:    5 * time.Second,
		BackoffMin:       100 * time.Millisecond,
		BackoffMax:       10 * time.Second,
	}
}

// Validate reports every problem in c, each saying how to fix it.
func (c ZMQConfig) Validate() error {
	var errs []error
	if _, _, err := splitTCP(c.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("kv events endpoint: %w", err))
	}
	if c.ReplayEndpoint != "" {
		if _, _, err := splitTCP(c.ReplayEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("kv events replay endpoint: %w", err))
		}
	}
	if c.DPRanks < 1 || c.DPRanks > 1024 {
		errs = append(errs, fmt.Errorf("kv events DP ranks %d: use the engine's data-parallel size, 1..1024", c.DPRanks))
	}
	if c.MaxMessageBytes < 1024 {
		errs = append(errs, fmt.Errorf("kv events max message bytes %d: use at least 1024 (default 8 MiB)", c.MaxMessageBytes))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idle timeout", c.IdleTimeout}, {"handshake timeout", c.HandshakeTimeout}, {"replay timeout", c.ReplayTimeout}, {"backoff min", c.BackoffMin}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("kv events %s %v: use a positive duration (see DefaultZMQConfig)", d.name, d.v))
		}
	}
	if c.BackoffMax < c.BackoffMin {
		errs = append(errs, fmt.Errorf("kv events backoff max %v is below min %v: raise it", c.BackoffMax, c.BackoffMin))
	}
	return errors.Join(errs...)
}

// splitTCP parses "tcp://host:port".
func splitTCP(ep string) (host string, port int, err error) {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return "", 0, fmt.Errorf("%q: use tcp://host:port", ep)
	}
	h, p, err := net.SplitHostPort(rest)
	if err != nil || h == "" || h == "*" {
		return "", 0, fmt.Errorf("%q: use tcp://host:port with the engine's host", ep)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: the port must be 1..65535", ep)
	}
	return h, port, nil
}

// RankEndpoint returns the host:port of rank r of a tcp endpoint (port + r), as the engines
// offset their sockets by data-parallel rank.
func RankEndpoint(ep string, r int) (string, error) {
	h, p, err := splitTCP(ep)
	if err != nil {
		return "", err
	}
	if p+r > 65535 {
		return "", fmt.Errorf("%q rank %d: port %d is past 65535", ep, r, p+r)
	}
	return net.JoinHostPort(h, strconv.Itoa(p+r)), nil
}
