package all

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/bucket"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/consistenthash"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/policy/prefixhash"
	"github.com/smg-go/smg/policy/sticky"
)

func TestEveryPolicyBuildsAndPicks(t *testing.T) {
	f := policytest.NewFleet(t, 3, "m")
	nb := builders(t, func(c *Config) { c.PDMode = true })
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
	if _, err := builders(t, nil)(bucket.Name, true); !errors.Is(err, ErrBucketOutsidePD) {
		t.Fatalf("building bucket outside PD: %v", err)
	}
	if DefaultPolicy != "cache_aware" {
		t.Fatalf("default policy %q", DefaultPolicy)
	}
}

func TestFromFlagsOrBuiltinDefaults(t *testing.T) {
	nb := builders(t, func(c *Config) { c.CacheAware.CacheThreshold = 0.9 })
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
	nb := builders(t, func(c *Config) { c.RoutingKeyOverride = true })
	for name, wrapped := range map[string]bool{
		cacheaware.Name: true, leastload.Name: true, prefixhash.Name: true,
		manual.Name: false, consistenthash.Name: false,
	} {
		b, err := nb(name, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.(*sticky.Builder); ok != wrapped {
			t.Errorf("%s: sticky wrapper %v, want %v", name, ok, wrapped)
		}
		if b.Name() != name {
			t.Errorf("%s reports %s", name, b.Name())
		}
	}
}

func TestMaintenanceForgetsCollectedInstances(t *testing.T) {
	m := NewMaintenance()
	nb := builders(t, func(c *Config) { c.Maintenance, c.PDMode = m, true })
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

// A per-policy part left zero is refused, naming the field and saying to start from
// DefaultConfig: zero never means "the defaults".
func TestZeroSubConfigIsRefused(t *testing.T) {
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Fatalf("DefaultConfig does not validate: %v", err)
	}
	for field, zero := range map[string]func(*Config){
		"CacheAware": func(c *Config) { c.CacheAware = cacheaware.Config{} },
		"LeastLoad":  func(c *Config) { c.LeastLoad = leastload.Config{} },
		"PowerOfTwo": func(c *Config) { c.PowerOfTwo = poweroftwo.Config{} },
		"PrefixHash": func(c *Config) { c.PrefixHash = prefixhash.Config{} },
		"Manual":     func(c *Config) { c.Manual = manual.Config{} },
		"Sticky":     func(c *Config) { c.Sticky = sticky.Config{} },
	} {
		c := DefaultConfig()
		zero(&c)
		nb, err := NewBuilderFunc(c)
		if err == nil || nb != nil {
			t.Fatalf("a zero %s was accepted", field)
		}
		if msg := err.Error(); !strings.Contains(msg, "all.Config."+field+" is zero") || !strings.Contains(msg, "all.DefaultConfig()") {
			t.Fatalf("zero %s: %q does not name the field and DefaultConfig", field, msg)
		}
	}
	var c Config
	if err := c.Validate(); err == nil || strings.Count(err.Error(), "is zero") != 6 {
		t.Fatalf("a zero Config: %v, want all six parts named", err)
	}
}

// builders is NewBuilderFunc over DefaultConfig with a private Maintenance, changed by set
// (nil: nothing).
func builders(t testing.TB, set func(*Config)) policy.NewBuilderFunc {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Maintenance = NewMaintenance()
	if set != nil {
		set(&cfg)
	}
	nb, err := NewBuilderFunc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

// Len returns how many instances are tracked (collected ones count until the next round).
func (m *Maintenance) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
