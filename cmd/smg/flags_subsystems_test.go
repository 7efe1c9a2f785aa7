package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/mesh"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/worker/health"
	"github.com/smg-go/smg/worker/loadmon"
	"github.com/smg-go/smg/worker/stall"
)

// parse parses args as `smg launch` would, without validating.
func parse(t *testing.T, args ...string) (*options, error) {
	t.Helper()
	var o options
	fs := newFlagSet(&o)
	return &o, fs.Parse(args)
}

// parseValid parses and validates args.
func parseValid(t *testing.T, args ...string) (*options, error) {
	t.Helper()
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		return &o, err
	}
	return &o, o.validate(fs)
}

// TestSubsystemFlagDefaultsAreTheirDefaultConfig: with no flags, every subsystem's config is
// its package's DefaultConfig, so the packages own their defaults and the flags restate none.
func TestSubsystemFlagDefaultsAreTheirDefaultConfig(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if d := health.DefaultConfig(); !reflect.DeepEqual(o.health, d) {
		t.Errorf("health flag defaults %+v, want %+v", o.health, d)
	}
	if d := loadmon.DefaultConfig(); !reflect.DeepEqual(o.loadmon, d) {
		t.Errorf("load flag defaults %+v, want %+v", o.loadmon, d)
	}
	if d := discovery.DefaultConfig(); !reflect.DeepEqual(o.disc, d) {
		t.Errorf("discovery flag defaults %+v, want %+v", o.disc, d)
	}
	if d := fastpath.DefaultConfig(); !reflect.DeepEqual(o.gateway, d) {
		t.Errorf("gateway flag defaults %+v, want %+v", o.gateway, d)
	}
	if d := stall.DefaultConfig(); !reflect.DeepEqual(o.stall, d) {
		t.Errorf("stall flag defaults %+v, want %+v", o.stall, d)
	}
	if d := all.DefaultConfig(); !reflect.DeepEqual(o.policies, d) {
		t.Errorf("policy flag defaults differ from all.DefaultConfig:\n%+v\n%+v", o.policies, d)
	}
	d := mesh.DefaultConfig()
	d.ServerName = o.mesh.ServerName // random
	if !reflect.DeepEqual(o.mesh, d) || !regexp.MustCompile(`^Mesh_[A-Za-z0-9]{4}$`).MatchString(o.mesh.ServerName) {
		t.Errorf("mesh flag defaults %+v", o.mesh)
	}
	for _, err := range []error{o.health.Validate(), o.loadmon.Validate(), o.policies.Validate(), o.mesh.Validate(), o.gateway.Validate(), o.stall.Validate()} {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestHealthFlags(t *testing.T) {
	for _, alias := range []string{"--remove-unhealthy-workers", "--worker-auto-recovery"} {
		o, err := parse(t, "--health-check-endpoint", "/ready", "--health-check-interval-secs", "10",
			"--health-check-timeout-secs=1.5", "--health-success-threshold", "4", "--health-failure-threshold", "5",
			alias, "--disable-health-check")
		if err != nil {
			t.Fatal(err)
		}
		want := health.DefaultConfig()
		want.Endpoint, want.Interval, want.Timeout, want.SuccessThreshold, want.FailureThreshold = "/ready", 10*time.Second, 1500*time.Millisecond, 4, 5
		want.RemoveUnhealthy, want.Disable = true, true
		if !reflect.DeepEqual(o.health, want) {
			t.Fatalf("%s: parsed %+v, want %+v", alias, o.health, want)
		}
	}
}

func TestPolicyFlags(t *testing.T) {
	o, err := parse(t, strings.Fields(`--cache-threshold 0.5 --spill-abs-threshold 10 --balance-rel-threshold 2
		--eviction-interval 30 --max-tree-size 1000 --block-size 64
		--least-load-kv-pressure-weight 0.5 --least-load-default-throughput 900 --least-load-mean-prefill-tokens 512 --least-load-max-waiting-requests 8
		--power-of-two-load-metric least_requests --routing-key-headers x-user x-session --routing-key-override
		--prefix-token-count 128 --cache-boundaries 2048,8192 --prefix-hash-load-factor 1.5 --prefix-hash-balance-abs-threshold 0
		--assignment-mode min_group --max-idle-secs 60`)...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.policies
	checks := []struct {
		name      string
		got, want any
	}{
		{"cache-threshold", cfg.CacheAware.CacheThreshold, 0.5},
		{"spill-abs-threshold alias", cfg.CacheAware.BalanceAbsThreshold, 10},
		{"balance-rel-threshold", cfg.CacheAware.BalanceRelThreshold, 2.0},
		{"eviction-interval", cfg.CacheAware.EvictionInterval, 30 * time.Second},
		{"max-tree-size", cfg.CacheAware.MaxTreeSize, int64(1000)},
		{"block-size", cfg.CacheAware.BlockSize, 64},
		{"kv weight", cfg.LeastLoad.KVPressureWeight, 0.5},
		{"throughput", cfg.LeastLoad.DefaultThroughput, 900.0},
		{"mean prefill", cfg.LeastLoad.MeanPrefillTokens, 512},
		{"max waiting", cfg.LeastLoad.MaxWaitingRequests, 8},
		{"p2 metric", cfg.PowerOfTwo.LoadMetric, poweroftwo.MetricLeastRequests},
		{"headers (the gateway's)", o.gateway.RoutingKeyHeaders, []string{"x-user", "x-session"}},
		{"override", cfg.RoutingKeyOverride, true},
		{"prefix tokens", cfg.PrefixHash.PrefixTokenCount, 128},
		{"boundaries", cfg.PrefixHash.CacheBoundaries, []int{2048, 8192}},
		{"load factor", cfg.PrefixHash.LoadFactor, 1.5},
		{"prefix abs", cfg.PrefixHash.BalanceAbsThreshold, 0},
		{"assignment", cfg.Manual.AssignmentMode, "min_group"},
		{"sticky assignment follows the flag", cfg.Sticky.AssignmentMode, "min_group"},
		{"max idle", cfg.Manual.MaxIdle, time.Minute},
		{"sticky max idle", cfg.Sticky.MaxIdle, time.Minute},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if err := o.policies.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSubsystemValidationMessagesNameTheFlag(t *testing.T) {
	cases := map[string]string{
		"--cache-threshold 1.5":                  "--cache-threshold",
		"--balance-rel-threshold 0.5":            "--balance-rel-threshold",
		"--balance-abs-threshold -1":             "--balance-abs-threshold",
		"--max-tree-size 0":                      "--max-tree-size",
		"--least-load-default-throughput 0":      "--least-load-default-throughput",
		"--least-load-kv-pressure-weight -1":     "--least-load-kv-pressure-weight",
		"--least-load-mean-prefill-tokens 0":     "--least-load-mean-prefill-tokens",
		"--least-load-max-waiting-requests -2":   "--least-load-max-waiting-requests",
		"--prefix-token-count 0":                 "--prefix-token-count",
		"--prefix-hash-load-factor 0.5":          "--prefix-hash-load-factor",
		"--prefix-hash-balance-abs-threshold -1": "--prefix-hash-balance-abs-threshold",
		"--routing-key-headers bad:name":         "--routing-key-headers",
		"--routing-key-headers x-é":              "--routing-key-headers",
		"--block-size 0":                         "--block-size",
		"--health-check-endpoint health":         "--health-check-endpoint",
		"--load-monitor-interval 0":              "--load-monitor-interval",
		"--kv-events-port 70000":                 "--kv-events-port",
		"--kv-events-replay-port 5558":           "needs --kv-events-port",
		"--kv-events-dp-size 0":                  "--kv-events-dp-size",
	}
	for args, flag := range cases {
		if _, err := parseValid(t, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: validation = %v, want a message naming %s", args, err, flag)
		}
	}
	for _, args := range []string{"--power-of-two-load-metric fastest", "--assignment-mode sticky", "--cache-boundaries 8,4", "--cache-boundaries x", "--max-tree-size 1e9"} {
		if _, err := parse(t, strings.Fields(args)...); err == nil {
			t.Errorf("%s: parse accepted it", args)
		}
	}
}

func TestMeshFlagValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string // substring of the error; "" means valid
	}{
		{[]string{"--enable-mesh", "--mesh-advertise-host", "10.0.0.1"}, ""},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1"}, ""},
		{[]string{"--enable-mesh"}, "mesh advertise address cannot be unspecified"},
		{[]string{"--enable-mesh", "--mesh-host", "::"}, "mesh advertise address cannot be unspecified"},
		{[]string{"--enable-mesh", "--mesh-advertise-host", "0.0.0.0"}, "mesh advertise address cannot be unspecified"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-port", "0"}, "mesh port cannot be 0"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-peer-urls", "smg-0.smg-mesh:39527"}, "Invalid mesh peer URL"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-peer-urls", "10.0.0.2"}, "Invalid mesh peer URL"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-peer-urls", "10.0.0.2:39527", "[fd00::2]:39527"}, ""},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-server-name", ""}, "mesh server name cannot be empty"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-server-name", "a:b"}, "cannot contain ':'"},
		{[]string{"--enable-mesh", "--mesh-host", "localhost"}, "invalid --mesh-host"},
		{[]string{"--enable-mesh", "--mesh-host", "10.0.0.1", "--mesh-tls-cert", "c.pem"}, "all three or none"},
		{[]string{"--mesh-port", "0"}, ""}, // the mesh is off: nothing to check
	}
	for _, c := range cases {
		o, err := parse(t, c.args...)
		if err == nil {
			err = o.mesh.Validate()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: unexpected error %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	o, err := parse(t, "--enable-mesh", "--mesh-advertise-host", "10.0.0.1", "--mesh-port", "4000")
	if err != nil || o.mesh.Validate() != nil {
		t.Fatal(err, o.mesh.Validate())
	}
	if o.mesh.AdvertiseAddr() != "10.0.0.1:4000" || o.mesh.ListenAddr() != "0.0.0.0:4000" {
		t.Fatalf("%s %s", o.mesh.AdvertiseAddr(), o.mesh.ListenAddr())
	}
}
