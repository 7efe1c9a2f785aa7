package fastpath

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/worker"
)

// TestZeroSettingsAreRefused: no zero setting stands for a default. DefaultConfig
// is valid; a zero that cannot work is refused naming the flag or the fix; the zeros that
// mean something (port 0: any, no first-byte timeout, no drain settle, no queue, no retries)
// stay valid.
func TestZeroSettingsAreRefused(t *testing.T) {
	if c := DefaultConfig(); c.Validate() != nil {
		t.Fatalf("DefaultConfig: %v", c.Validate())
	}
	for _, tc := range []struct {
		zero func(*Config)
		want string
	}{
		{func(c *Config) { c.Host = "" }, "--host"},
		{func(c *Config) { c.MaxPayloadSize = 0 }, "--max-payload-size 0"},
		{func(c *Config) { c.MaxBodyMemory = 0 }, "--max-request-body-memory 0"},
		{func(c *Config) { c.MaxHeaderSize = 0 }, "--max-header-size 0"},
		{func(c *Config) { c.RequestTimeout = 0 }, "--request-timeout-secs"},
		{func(c *Config) { c.ReadTimeout = 0 }, "DefaultConfig"},
		{func(c *Config) { c.IdleTimeout = 0 }, "DefaultConfig"},
		{func(c *Config) { c.MaxConnections = 0 }, "DefaultConfig"},
		{func(c *Config) { c.EventLoops = 0 }, "DefaultConfig"},
		{func(c *Config) { c.MaxConnsPerWorker = 0 }, "--max-connections-per-worker 0"},
		{func(c *Config) { c.Admission.QueueTimeout = 0 }, "--queue-timeout-secs"},
		{func(c *Config) { c.FanOut.Concurrency = 0 }, "DefaultFanOutConfig"},
		{func(c *Config) { c.FanOut.Timeout = 0 }, "DefaultFanOutConfig"},
		{func(c *Config) { c.FanOut.MaxEngineSeries = 0 }, "DefaultFanOutConfig"},
		{func(c *Config) { c.Clock = nil }, "fastpath.Config.Clock is nil"},
		{func(c *Config) { c.Metrics = nil }, "fastpath.Config.Metrics is nil"},
		{func(c *Config) { c.Logger = nil }, "fastpath.Config.Logger is nil"},
	} {
		c := DefaultConfig()
		tc.zero(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error naming %q", err, tc.want)
		}
	}
	c := DefaultConfig()
	c.Port, c.FirstByteTimeout, c.DrainSettle, c.Admission.QueueSize, c.Retry = 0, 0, 0, 0, RetryConfig{}
	if err := c.Validate(); err != nil {
		t.Fatalf("meaningful zeros refused: %v", err)
	}
}

// A gRPC backend sizes its tokenizer pool explicitly: 0 is refused, not read as a default.
func TestGRPCBackendNeedsATokenizerPoolSize(t *testing.T) {
	b := GRPCBackend{
		IsGRPC: func(*worker.Worker) bool { return true },
		Client: func(*worker.Worker) (*grpcworker.Client, error) { return nil, nil },
		Model:  func(string) (GRPCModel, bool) { return GRPCModel{}, false },
	}
	if err := b.validate(); err == nil || !strings.Contains(err.Error(), "tokenizer pool size 0") {
		t.Fatalf("Tokenizers 0: %v, want an error naming the pool size", err)
	}
	b.Tokenizers = 1
	if err := b.validate(); err != nil {
		t.Fatalf("Tokenizers 1: %v", err)
	}
}
