package loadgen

import (
	"strings"
	"testing"
	"time"
)

func TestValidateNamesTheFlagAndTheFix(t *testing.T) {
	base := DefaultConfig()
	base.BaseURL, base.Model = "http://127.0.0.1:8000/v1", "m"
	if err := base.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no base url", func(c *Config) { c.BaseURL = "" }, "--base-url"},
		{"bad scheme", func(c *Config) { c.BaseURL = "ftp://x/v1" }, "--base-url"},
		{"no model", func(c *Config) { c.Model = "" }, "--model"},
		{"endpoint", func(c *Config) { c.Endpoint = "embeddings" }, "--endpoint"},
		{"workload", func(c *Config) { c.Workload = "sharegpt" }, "--workload"},
		{"raw needs chat", func(c *Config) { c.Workload, c.Endpoint = WorkloadRaw, EndpointGenerate }, "--endpoint chat"},
		{"arrival", func(c *Config) { c.Arrival = "bursty" }, "--arrival"},
		{"negative rate", func(c *Config) { c.RequestRate = -1 }, "--request-rate"},
		{"negative concurrency", func(c *Config) { c.MaxConcurrency = -2 }, "--max-concurrency"},
		{"negative duration", func(c *Config) { c.Duration = -time.Second }, "--duration"},
		{"range ratio", func(c *Config) { c.Random.RangeRatio = 1.5 }, "--random-range-ratio"},
		{"distribution", func(c *Config) { c.Random.Distribution = "zipf" }, "--random-distribution"},
		{"huge prompt", func(c *Config) { c.Random.InputLen = 1 << 30 }, "--random-input-len"},
		{"header name", func(c *Config) { c.Headers = map[string]string{"Bad Name": "x"} }, "--header"},
		{"session header", func(c *Config) { c.SessionHeader = "a:b" }, "--session-header"},
		{"multi-turn clients", func(c *Config) {
			c.Workload, c.MaxConcurrency, c.MultiTurn.Users = WorkloadMultiTurn, 8, 4
		}, "--mt-users"},
	}
	for _, c := range cases {
		cfg := base
		c.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, err, c.want)
		}
	}
	// Errors are reported together, not one per attempt.
	cfg := base
	cfg.BaseURL, cfg.RequestRate = "", -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--base-url") || !strings.Contains(err.Error(), "--request-rate") {
		t.Errorf("joined errors: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	c := DefaultConfig()
	if !c.Stream || !c.IgnoreEOS || c.Endpoint != EndpointChat || c.Workload != WorkloadRandom || c.Arrival != ArrivalPoisson ||
		c.Timeout != DefaultTimeout || c.SharedPrefix.SystemPromptLen != 2048 || c.NumRequests != 0 {
		t.Fatalf("defaults %+v", c)
	}
	for _, tc := range []struct {
		kind WorkloadKind
		want int
	}{{WorkloadRandom, 1000}, {WorkloadSharedPrefix, 64 * 16}, {WorkloadMultiTurn, 16 * 4}, {WorkloadRaw, 1000}} {
		c := DefaultConfig()
		c.Workload = tc.kind
		c.derive()
		if c.NumRequests != tc.want {
			t.Errorf("%s: NumRequests default %d, want %d", tc.kind, c.NumRequests, tc.want)
		}
	}
	c = DefaultConfig()
	c.Duration = time.Second
	c.derive()
	if c.NumRequests != 0 {
		t.Errorf("with a duration, NumRequests defaults to %d, want 0 (no limit)", c.NumRequests)
	}
	c = DefaultConfig()
	c.NumRequests = 10
	c.derive()
	if c.Random.NumPrompts != 10 {
		t.Errorf("NumPrompts %d, want NumRequests 10", c.Random.NumPrompts)
	}
}

// Zero is not "the default": a Config not built from DefaultConfig is
// refused on every field whose zero makes no sense, each message saying what to do.
func TestZeroConfigIsRefused(t *testing.T) {
	c := Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}
	err := c.Validate()
	for _, field := range []string{"Endpoint", "Workload", "Arrival", "Random.Distribution", "Timeout (--timeout) 0s",
		"TimelineInterval 0s", "Random.InputLen", "SharedPrefix.NumGroups", "MultiTurn.Users", "MixedSize.LongLen",
		"Raw.OutputTokens", "loadgen.DefaultConfig()"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("zero Config: %v, want it to name %q", err, field)
		}
	}
	d := DefaultConfig()
	d.BaseURL, d.Model = c.BaseURL, c.Model
	if err := d.Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
}

func TestRequestURL(t *testing.T) {
	for _, c := range []struct {
		base string
		ep   Endpoint
		want string
	}{
		{"http://h:1/v1", EndpointChat, "http://h:1/v1/chat/completions"},
		{"http://h:1/v1/", EndpointCompletions, "http://h:1/v1/completions"},
		{"http://h:1/v1", EndpointGenerate, "http://h:1/generate"},
		{"http://h:1", EndpointGenerate, "http://h:1/generate"},
	} {
		cfg := Config{BaseURL: c.base, Endpoint: c.ep}
		if got := cfg.requestURL(); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.base, c.ep, got, c.want)
		}
	}
}
