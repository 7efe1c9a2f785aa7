package trace

import (
	"fmt"
	"net"
	"time"
)

// Defaults of Config.
const (
	DefaultEndpoint      = "localhost:4317"
	DefaultServiceName   = "smg"
	DefaultBatchTimeout  = 500 * time.Millisecond
	DefaultQueueSize     = 8192
	DefaultBatchSize     = 512
	DefaultExportTimeout = 10 * time.Second
)

// Config configures the span exporter.
type Config struct {
	// Enable exports spans (--enable-trace). Off, New returns a Tracer that exports nothing.
	Enable bool
	// Endpoint is the host:port of an OTLP/gRPC trace receiver, spoken to in plaintext
	// (--otlp-traces-endpoint, default localhost:4317).
	Endpoint string
	// ServiceName is the service.name resource attribute of every span (default "smg").
	ServiceName string
	// BatchTimeout is the longest a span waits before its batch is sent (default 500 ms);
	// BatchSize the spans sent at most in one export (default 512); QueueSize the spans
	// waiting at most, past which new ones are dropped (default 8192); ExportTimeout bounds
	// one export (default 10 s).
	BatchTimeout  time.Duration
	BatchSize     int
	QueueSize     int
	ExportTimeout time.Duration
}

// DefaultConfig returns tracing off, with the defaults above for when it is turned on.
func DefaultConfig() Config {
	return Config{
		Endpoint:      DefaultEndpoint,
		ServiceName:   DefaultServiceName,
		BatchTimeout:  DefaultBatchTimeout,
		BatchSize:     DefaultBatchSize,
		QueueSize:     DefaultQueueSize,
		ExportTimeout: DefaultExportTimeout,
	}
}

// Validate reports a setting that cannot work, naming the fix.
func (c *Config) Validate() error {
	if !c.Enable {
		return nil
	}
	if host, port, err := net.SplitHostPort(c.Endpoint); err != nil || host == "" || port == "" {
		return fmt.Errorf("--otlp-traces-endpoint %q: give the host:port of an OTLP/gRPC receiver, for example %s", c.Endpoint, DefaultEndpoint)
	}
	switch {
	case c.ServiceName == "":
		return fmt.Errorf("trace service name is empty: start from trace.DefaultConfig() (%q)", DefaultServiceName)
	case c.BatchTimeout <= 0 || c.ExportTimeout <= 0:
		return fmt.Errorf("trace batch timeout %v and export timeout %v must be positive: start from trace.DefaultConfig() (%v, %v)", c.BatchTimeout, c.ExportTimeout, DefaultBatchTimeout, DefaultExportTimeout)
	case c.BatchSize < 1 || c.QueueSize < c.BatchSize:
		return fmt.Errorf("trace batch size %d and queue size %d: the batch must be at least 1 and the queue at least a batch: start from trace.DefaultConfig() (%d, %d)", c.BatchSize, c.QueueSize, DefaultBatchSize, DefaultQueueSize)
	}
	return nil
}
