package all

import (
	"errors"
	"reflect"
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
	"github.com/smg-go/smg/policy/prefixhash"
	"github.com/smg-go/smg/policy/sticky"
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

// Len returns how many instances are tracked (collected ones count until the next round).
func (m *Maintenance) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
