package discovery

import (
	"strings"
	"testing"
)

// TestZeroSettingsAreRefused: no zero setting means "the default": a zero that
// cannot work is refused by Validate, naming what to give; DefaultConfig passes.
func TestZeroSettingsAreRefused(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.Enabled, c.Selector = true, []string{"app=sglang"}
		return c
	}
	if c := valid(); c.Validate() != nil {
		t.Fatalf("DefaultConfig: %v", c.Validate())
	}
	for _, tc := range []struct {
		zero func(*Config)
		want string
	}{
		{func(c *Config) { c.Port = 0 }, "--service-discovery-port 0"},
		{func(c *Config) { c.JobQueueCapacity = 0 }, "--job-queue-capacity 0"},
		{func(c *Config) { c.JobQueueConcurrency = 0 }, "--job-queue-concurrency 0"},
		{func(c *Config) { c.WorkerStartupCheckInterval = 0 }, "--worker-startup-check-interval 0"},
		{func(c *Config) { c.WorkerStartupTimeout = 0 }, "--worker-startup-timeout-secs 0"},
		{func(c *Config) { c.Debounce = 0 }, "DefaultConfig"},
		{func(c *Config) { c.Resync = 0 }, "DefaultConfig"},
		{func(c *Config) { c.ProbeTimeout = 0 }, "DefaultConfig"},
		{func(c *Config) { c.KVConnectorAnnotation = "" }, "--kv-connector-annotation"},
		{func(c *Config) { c.KVEngineIDAnnotation = "" }, "--kv-engine-id-annotation"},
	} {
		c := valid()
		tc.zero(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error naming %q", err, tc.want)
		}
	}
	// Zeros that mean something stay valid: no startup delay, no drain settle.
	c := valid()
	c.WorkerStartupDelay, c.DrainSettle = 0, 0
	if err := c.Validate(); err != nil {
		t.Fatalf("zero startup delay and drain settle refused: %v", err)
	}
}
