package all

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/bucket"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/consistenthash"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/policy/prefixhash"
)

func TestEveryPolicyBuildsAndPicks(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	nb := NewBuilderFunc(Config{PDMode: true, Maintenance: NewMaintenance()})
	if len(Names()) != 10 {
		t.Fatalf("%d policies, want the spec's ten: %v", len(Names()), Names())
	}
	for _, name := range Names() {
		for _, fromFlags := range []bool{true, false} {
			b, err := nb(name, fromFlags)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if b.Name() != name {
				t.Fatalf("builder of %s calls itself %s", name, b.Name())
			}
			res, err := b.Build(f.Group("m")).Pick(&policy.Request{Text: []byte("hello"), RoutingKey: []byte("k")})
			if err != nil || res.Worker == nil {
				t.Fatalf("%s: pick %v, %v", name, res.Worker, err)
			}
		}
	}
	if err := Check("fastest"); err == nil || !strings.Contains(err.Error(), "cache_aware") {
		t.Fatalf("Check of an unknown policy: %v", err)
	}
}

func TestBucketRefusedOutsidePD(t *testing.T) {
	if err := CheckPolicy(bucket.Name, false); !errors.Is(err, ErrBucketOutsidePD) || !strings.Contains(err.Error(), "--prefill-policy bucket") {
		t.Fatalf("CheckPolicy(bucket, no PD) = %v", err)
	}
	if err := CheckPolicy(bucket.Name, true); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBuilderFunc(Config{Maintenance: NewMaintenance()})(bucket.Name, true); !errors.Is(err, ErrBucketOutsidePD) {
		t.Fatalf("building bucket outside PD: %v", err)
	}
	if DefaultPolicy != "cache_aware" {
		t.Fatalf("default policy %q", DefaultPolicy)
	}
}

func TestRegisterFlagsDefaultsAndParsing(t *testing.T) {
	var cfg Config
	fs := cli.NewFlagSet("smg launch")
	RegisterFlags(fs, &cfg)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if d := DefaultConfig(); !reflect.DeepEqual(policiesOf(cfg), policiesOf(d)) {
		t.Fatalf("flag defaults differ from DefaultConfig:\n%+v\n%+v", policiesOf(cfg), policiesOf(d))
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	cfg = Config{}
	fs = cli.NewFlagSet("smg launch")
	RegisterFlags(fs, &cfg)
	err := fs.Parse(strings.Fields(`--cache-threshold 0.5 --spill-abs-threshold 10 --balance-rel-threshold 2
		--eviction-interval 30 --max-tree-size 1000 --block-size 64
		--least-load-kv-pressure-weight 0.5 --least-load-default-throughput 900 --least-load-mean-prefill-tokens 512 --least-load-max-waiting-requests 8
		--power-of-two-load-metric least_requests --routing-key-headers x-user x-session --routing-key-override
		--prefix-token-count 128 --cache-boundaries 2048,8192 --prefix-hash-load-factor 1.5 --prefix-hash-balance-abs-threshold 0
		--assignment-mode min_group --max-idle-secs 60`))
	if err != nil {
		t.Fatal(err)
	}
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
		{"headers", cfg.RoutingKeyHeaders, []string{"x-user", "x-session"}},
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
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func policiesOf(c Config) []any {
	return []any{c.CacheAware, c.LeastLoad, c.PowerOfTwo, c.PrefixHash, c.Manual, c.Sticky, c.RoutingKeyOverride, c.RoutingKeyHeaders}
}

func TestValidationMessagesNameTheFlag(t *testing.T) {
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
		"--block-size 0":                         "--block-size",
	}
	for args, flag := range cases {
		var cfg Config
		fs := cli.NewFlagSet("smg launch")
		RegisterFlags(fs, &cfg)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatalf("%s: parse: %v", args, err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: Validate = %v, want a message naming %s", args, err, flag)
		}
	}
	for _, args := range []string{"--power-of-two-load-metric fastest", "--assignment-mode sticky", "--cache-boundaries 8,4", "--cache-boundaries x", "--max-tree-size 1e9"} {
		var cfg Config
		fs := cli.NewFlagSet("smg launch")
		RegisterFlags(fs, &cfg)
		if err := fs.Parse(strings.Fields(args)); err == nil {
			t.Errorf("%s: parse accepted it", args)
		}
	}
}

func TestFromFlagsOrBuiltinDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CacheAware.CacheThreshold = 0.9
	cfg.Maintenance = NewMaintenance()
	nb := NewBuilderFunc(cfg)
	flags, _ := nb(cacheaware.Name, true)
	builtin, _ := nb(cacheaware.Name, false)
	if got := flags.(*cacheaware.Builder).Config().CacheThreshold; got != 0.9 {
		t.Fatalf("fromFlags instance threshold %v", got)
	}
	if got := builtin.(*cacheaware.Builder).Config(); got.CacheThreshold != 0.5 || got.MaxTreeSize != 10_000 {
		t.Fatalf("built-in instance %+v", got)
	}
}

func TestStickyWrapping(t *testing.T) {
	nb := NewBuilderFunc(Config{RoutingKeyOverride: true, Maintenance: NewMaintenance()})
	for name, wrapped := range map[string]bool{
		cacheaware.Name: true, leastload.Name: true, prefixhash.Name: true,
		manual.Name: false, consistenthash.Name: false,
	} {
		b, err := nb(name, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.(*policy.StickyBuilder); ok != wrapped {
			t.Errorf("%s: sticky wrapper %v, want %v", name, ok, wrapped)
		}
		if b.Name() != name {
			t.Errorf("%s reports %s", name, b.Name())
		}
	}
}

func TestMaintenanceForgetsCollectedInstances(t *testing.T) {
	m := NewMaintenance()
	nb := NewBuilderFunc(Config{Maintenance: m, PDMode: true})
	keep, _ := nb(cacheaware.Name, true)
	for _, name := range []string{manual.Name, bucket.Name, cacheaware.Name} {
		if _, err := nb(name, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nb(leastload.Name, true); err != nil { // nothing to maintain: not tracked
		t.Fatal(err)
	}
	if m.Len() != 4 {
		t.Fatalf("tracking %d instances, want 4", m.Len())
	}
	runtime.GC()
	m.Maintain(time.Now())
	if m.Len() != 1 {
		t.Fatalf("after a collection %d instances remain, want the 1 still referenced", m.Len())
	}
	runtime.KeepAlive(keep)
}

func TestZeroConfigWorks(t *testing.T) {
	b, err := NewBuilderFunc(Config{Maintenance: NewMaintenance()})(cacheaware.Name, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.(*cacheaware.Builder).Config(); !reflect.DeepEqual(got.CacheThreshold, cacheaware.DefaultCacheThreshold) || got.MaxTreeSize != cacheaware.DefaultMaxTreeSize {
		t.Fatalf("zero Config built %+v", got)
	}
	var c Config
	if err := c.Validate(); err != nil {
		t.Fatalf("zero Config does not validate: %v", err)
	}
}
