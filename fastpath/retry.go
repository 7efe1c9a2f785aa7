package fastpath

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryConfig is the retry policy for requests whose worker failed before the first response
// byte reached the client (--retry-* flags).
type RetryConfig struct {
	// MaxRetries is the number of retries after the first attempt (--retry-max-retries).
	MaxRetries int
	// InitialBackoff is the pause before the first retry (--retry-initial-backoff-ms).
	InitialBackoff time.Duration
	// MaxBackoff caps the pause (--retry-max-backoff-ms).
	MaxBackoff time.Duration
	// Multiplier grows the pause per retry (--retry-backoff-multiplier).
	Multiplier float64
	// Jitter spreads each pause uniformly by ± this fraction (--retry-jitter-factor).
	Jitter float64
	// Disabled turns retries off (--disable-retries).
	Disabled bool
}

// Defaults of RetryConfig, the spec product's.
const (
	DefaultRetryMaxRetries     = 5
	DefaultRetryInitialBackoff = 50 * time.Millisecond
	DefaultRetryMaxBackoff     = 30 * time.Second
	DefaultRetryMultiplier     = 1.5
	DefaultRetryJitter         = 0.2
)

// DefaultRetryConfig returns the defaults.
func DefaultRetryConfig() RetryConfig {
	return RetryConfig{
		MaxRetries: DefaultRetryMaxRetries, InitialBackoff: DefaultRetryInitialBackoff,
		MaxBackoff: DefaultRetryMaxBackoff, Multiplier: DefaultRetryMultiplier, Jitter: DefaultRetryJitter,
	}
}

// Validate names the flag of the first invalid setting.
func (c *RetryConfig) Validate() error {
	switch {
	case c.Disabled, *c == RetryConfig{}:
		return nil // no retries: the backoff settings do not matter
	case c.MaxRetries < 0:
		return fmt.Errorf("--retry-max-retries %d: must be >= 0", c.MaxRetries)
	case c.InitialBackoff < 0 || c.MaxBackoff < 0:
		return fmt.Errorf("--retry-initial-backoff-ms and --retry-max-backoff-ms must be >= 0")
	case c.MaxBackoff < c.InitialBackoff:
		return fmt.Errorf("--retry-max-backoff-ms (%v) must be >= --retry-initial-backoff-ms (%v)", c.MaxBackoff, c.InitialBackoff)
	case c.Multiplier < 1:
		return fmt.Errorf("--retry-backoff-multiplier %v: must be >= 1", c.Multiplier)
	case c.Jitter < 0 || c.Jitter > 1:
		return fmt.Errorf("--retry-jitter-factor %v: must be in [0, 1]", c.Jitter)
	}
	return nil
}

// attempts is how many times a request may be sent in all.
func (c *RetryConfig) attempts() int {
	if c.Disabled {
		return 1
	}
	return 1 + c.MaxRetries
}

// backoff is the pause before retry number n (0 for the first retry).
func (c *RetryConfig) backoff(n int) time.Duration {
	d := float64(c.InitialBackoff)
	for range n {
		d *= c.Multiplier
		if d >= float64(c.MaxBackoff) {
			d = float64(c.MaxBackoff)
			break
		}
	}
	if c.Jitter > 0 {
		d *= 1 + c.Jitter*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

// retryableStatus reports the upstream statuses worth another worker: the engine was busy
// (429, 503), timed out (408, 504) or broke (500, 502). Other 4xx are the client's fault and
// would fail anywhere.
func retryableStatus(status int) bool {
	switch status {
	case 408, 429, 500, 502, 503, 504:
		return true
	}
	return false
}
