package health

import (
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/worker"
)

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		flag string
	}{
		{func(c *Config) { c.Endpoint = "health" }, "--health-check-endpoint"},
		{func(c *Config) { c.Endpoint = "" }, "--health-check-endpoint"},
		{func(c *Config) { c.Interval = 0 }, "--health-check-interval-secs"},
		{func(c *Config) { c.Timeout = 0 }, "--health-check-timeout-secs"},
		{func(c *Config) { c.SuccessThreshold = 0 }, "--health-success-threshold"},
		{func(c *Config) { c.FailureThreshold = 0 }, "--health-failure-threshold"},
		{func(c *Config) { c.Concurrency = -1 }, "concurrency"},
		{func(c *Config) { c.PendingBackoff = 0 }, "pending backoff"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "give") {
			t.Errorf("%+v: error %v, want one naming %s and saying what to give", c, err, tc.flag)
		}
		if _, err := New(c, nil); err == nil {
			t.Errorf("%+v: New accepted an invalid config", c)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestOverrides(t *testing.T) {
	c := DefaultConfig()
	if got := c.For(nil); got != (Settings{Endpoint: "/health", Interval: 60 * time.Second, Timeout: 5 * time.Second, Thresholds: Thresholds{2, 3}}) {
		t.Fatalf("no override: %+v", got)
	}
	full := &worker.HealthOverride{
		Endpoint: ptr("/ready"), IntervalSecs: ptr(7), TimeoutSecs: ptr(2),
		SuccessThreshold: ptr(1), FailureThreshold: ptr(9), Disable: ptr(true),
	}
	if got := c.For(full); got != (Settings{Endpoint: "/ready", Interval: 7 * time.Second, Timeout: 2 * time.Second, Thresholds: Thresholds{1, 9}, Disabled: true}) {
		t.Fatalf("full override: %+v", got)
	}
	bad := &worker.HealthOverride{Endpoint: ptr("ready"), IntervalSecs: ptr(0), TimeoutSecs: ptr(-1), SuccessThreshold: ptr(0), FailureThreshold: ptr(-3)}
	if got := c.For(bad); got != c.For(nil) {
		t.Fatalf("out-of-range override fields must inherit: %+v", got)
	}
	c.Disable = true
	if !c.For(nil).Disabled || c.For(&worker.HealthOverride{Disable: ptr(false)}).Disabled {
		t.Fatal("a worker's explicit disable_health_check=false must win over --disable-health-check")
	}
}

func TestValidateOverride(t *testing.T) {
	if err := ValidateOverride(nil); err != nil {
		t.Fatal(err)
	}
	if err := ValidateOverride(&worker.HealthOverride{Endpoint: ptr("/h"), IntervalSecs: ptr(1), Disable: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    worker.HealthOverride
		name string
	}{
		{worker.HealthOverride{Endpoint: ptr("h")}, "health.endpoint"},
		{worker.HealthOverride{IntervalSecs: ptr(0)}, "health.check_interval_secs"},
		{worker.HealthOverride{TimeoutSecs: ptr(-1)}, "health.timeout_secs"},
		{worker.HealthOverride{SuccessThreshold: ptr(0)}, "health.success_threshold"},
		{worker.HealthOverride{FailureThreshold: ptr(0)}, "health.failure_threshold"},
	} {
		if err := ValidateOverride(&tc.o); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%+v: error %v, want one naming %s", tc.o, err, tc.name)
		}
	}
}

func TestInitialStatus(t *testing.T) {
	c := DefaultConfig()
	if got := c.InitialStatus(&worker.Spec{}); got != worker.StatusPending {
		t.Fatalf("checked worker starts %v", got)
	}
	if got := c.InitialStatus(&worker.Spec{Health: &worker.HealthOverride{Disable: ptr(true)}}); got != worker.StatusReady {
		t.Fatalf("worker with checks disabled starts %v", got)
	}
	c.Disable = true
	if got := c.InitialStatus(&worker.Spec{}); got != worker.StatusReady {
		t.Fatalf("with --disable-health-check a worker starts %v", got)
	}
}
