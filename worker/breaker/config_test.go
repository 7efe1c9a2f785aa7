package breaker

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		flag string
	}{
		{func(c *Config) { c.FailureThreshold = 0 }, "--cb-failure-threshold"},
		{func(c *Config) { c.FailureThreshold = MaxFailureThreshold + 1 }, "--cb-failure-threshold"},
		{func(c *Config) { c.SuccessThreshold = 0 }, "--cb-success-threshold"},
		{func(c *Config) { c.SuccessThreshold = MaxProbes + 1 }, "--cb-success-threshold"},
		{func(c *Config) { c.Timeout = 0 }, "--cb-timeout-duration-secs"},
		{func(c *Config) { c.Timeout = time.Microsecond }, "--cb-timeout-duration-secs"},
		{func(c *Config) { c.Window = 0 }, "--cb-window-duration-secs"},
		{func(c *Config) { c.Window = MinWindow - 1 }, "--cb-window-duration-secs"},
		{func(c *Config) { c.MaxHalfOpenProbes = -1 }, "half-open probe limit"},
		{func(c *Config) { c.MaxHalfOpenProbes = MaxProbes + 1 }, "half-open probe limit"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "give") {
			t.Errorf("%+v: error %v, want one naming %s and saying what to give", c, err, tc.flag)
		}
		var b Breaker
		if b.Init(c, nil) == nil {
			t.Errorf("%+v: Init accepted an invalid config", c)
		}
	}
}

func TestMaxHalfOpenProbesIsExplicit(t *testing.T) {
	c := DefaultConfig()
	if c.MaxHalfOpenProbes != DefaultSuccessThreshold || newSettings(c, nil).maxProbes != DefaultSuccessThreshold {
		t.Fatalf("default half-open probes %d, want the default success threshold %d", c.MaxHalfOpenProbes, DefaultSuccessThreshold)
	}
	c.MaxHalfOpenProbes = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "DefaultConfig") {
		t.Fatalf("a zero probe limit: %v, want a refusal saying where to start", err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status    int
		transport bool
		want      Outcome
	}{
		{200, false, Success},
		{204, false, Success},
		{101, false, Success},
		{301, false, Success},
		{400, false, ClientError},
		{401, false, ClientError},
		{404, false, ClientError},
		{408, false, ClientError},
		{413, false, ClientError},
		{499, false, ClientError},
		{429, false, Backpressure},
		{503, false, Backpressure},
		{500, false, Fault},
		{501, false, Fault},
		{502, false, Fault},
		{504, false, Fault},
		{599, false, Fault},
		{0, true, Fault},
		{200, true, Fault}, // a transport error wins over any status
		{503, true, Fault},
		{0, false, Fault},  // no status and no error: a broken answer
		{99, false, Fault}, // not an HTTP status
		{600, false, Fault},
	} {
		if got := Classify(tc.status, tc.transport); got != tc.want {
			t.Errorf("Classify(%d, %v) = %v, want %v", tc.status, tc.transport, got, tc.want)
		}
	}
}
