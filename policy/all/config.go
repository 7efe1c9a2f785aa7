package all

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/manual"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/policy/prefixhash"
)

// Config carries what policies need to be built: every policy's CLI-tuned settings and the
// shared services. Start from DefaultConfig (or let RegisterFlags write the defaults);
// NewBuilderFunc also accepts a partly zero Config and fills the zero parts.
type Config struct {
	// Per-policy settings, each with its spec defaults and Validate.
	CacheAware cacheaware.Config
	LeastLoad  leastload.Config
	PowerOfTwo poweroftwo.Config
	PrefixHash prefixhash.Config
	Manual     manual.Config
	// Sticky configures --routing-key-override's pins; its assignment mode defaults to
	// delegate (the policy underneath places each session's first request) unless
	// --assignment-mode is given.
	Sticky policy.StickyConfig

	// RoutingKeyOverride (--routing-key-override) turns on sticky sessions keyed by the
	// body's rid (turn and retry suffixes stripped) or the routing-key headers.
	RoutingKeyOverride bool
	// RoutingKeyHeaders (--routing-key-headers) are header names read for the routing key
	// before X-SMG-Routing-Key. The gateway's request extraction reads them; policies see the
	// validated value in policy.Request.RoutingKey.
	RoutingKeyHeaders []string
	// PDMode is true when the gateway runs PD disaggregation; bucket is refused without it.
	PDMode bool
	// KeyLoads is the gateway's per-session in-flight count (policy.StickyKeyHash at dispatch,
	// Add +1 and -1); with it, sticky sessions bypass a session's worker once the session has
	// policy.StickyInFlightCap requests in flight. Nil: no cap.
	KeyLoads *policy.KeyLoads

	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Rand is the randomness source (nil: policy.RuntimeRand).
	Rand policy.Rand
	// Clock is read when a policy instance is created (starting coarse clocks). Default
	// clock.Real.
	Clock clock.Clock
	// Metrics receives the policies' branch counters and gauges. Nil: a private set.
	Metrics *metrics.Set
	// TreeObserver is told of every prefix cache_aware records (the mesh). Nil: none.
	TreeObserver policy.TreeObserver
	// Maintenance runs the instances' background work. Nil: DefaultMaintenance.
	Maintenance *Maintenance
}

// DefaultConfig returns every spec default.
func DefaultConfig() Config {
	return Config{
		CacheAware: cacheaware.DefaultConfig(),
		LeastLoad:  leastload.DefaultConfig(),
		PowerOfTwo: poweroftwo.DefaultConfig(),
		PrefixHash: prefixhash.DefaultConfig(),
		Manual:     manual.DefaultConfig(),
		Sticky:     policy.DefaultStickyConfig(),
	}
}

// Validate reports every setting out of range; each message names the flag and the valid range.
func (c *Config) Validate() error {
	d := c.withDefaults()
	errs := []error{
		d.CacheAware.Validate(), d.LeastLoad.Validate(), d.PowerOfTwo.Validate(),
		d.PrefixHash.Validate(), d.Manual.Validate(), policy.ValidateAssignmentMode(d.Sticky.AssignmentMode),
	}
	for _, h := range c.RoutingKeyHeaders {
		if !validHeaderName(h) {
			errs = append(errs, fmt.Errorf("--routing-key-headers: %q is not a valid HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", h))
		}
	}
	return errors.Join(errs...)
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// RegisterFlags registers every policy flag of the spec on fs with its spec name and default,
// writing into cfg. --policy itself is the gateway's (DefaultPolicy is its default).
func RegisterFlags(fs *cli.FlagSet, cfg *Config) {
	*cfg = mergeServices(DefaultConfig(), *cfg)
	fs.Group("Routing policies")

	ca := &cfg.CacheAware
	fs.Float("cache-threshold", &ca.CacheThreshold, cacheaware.DefaultCacheThreshold,
		"cache_aware: route to a prefix holder only when the match ratio is above this (0-1)")
	fs.Alias("cache-match-threshold", "cache-threshold")
	fs.Int("balance-abs-threshold", &ca.BalanceAbsThreshold, cacheaware.DefaultBalanceAbsThreshold,
		"cache_aware spill gate: a holder is hot above the fleet mean plus this many in-flight requests (bucket: characters)")
	fs.Alias("spill-abs-threshold", "balance-abs-threshold")
	fs.Float("balance-rel-threshold", &ca.BalanceRelThreshold, cacheaware.DefaultBalanceRelThreshold,
		"cache_aware spill gate: and above this multiple of the fleet mean (>= 1)")
	fs.Alias("spill-rel-threshold", "balance-rel-threshold")
	fs.Duration("eviction-interval", &ca.EvictionInterval, cacheaware.DefaultEvictionInterval,
		"cache_aware: seconds between evictions of trees over --max-tree-size")
	fs.Alias("eviction-interval-secs", "eviction-interval")
	fs.Func("max-tree-size", strconv.FormatInt(cacheaware.DefaultMaxTreeSize, 10), "a positive character count such as 67108864",
		"cache_aware: per-model tree budget in characters (text) or tokens", func(v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("not an integer")
			}
			ca.MaxTreeSize = n
			return nil
		})
	fs.Int("block-size", &ca.BlockSize, cacheaware.DefaultBlockSize,
		"cache_aware: token tree page size; set it to the engines' KV page size")

	ll := &cfg.LeastLoad
	fs.Float("least-load-kv-pressure-weight", &ll.KVPressureWeight, policy.DefaultKVPressureWeight,
		"least_load: weight in seconds of the KV-pressure term; 0 removes it")
	fs.Float("least-load-default-throughput", &ll.DefaultThroughput, policy.DefaultThroughput,
		"least_load: generation rate in tokens/s assumed when no worker reports one (the score divides by the fleet's mean reported rate)")
	fs.Int("least-load-mean-prefill-tokens", &ll.MeanPrefillTokens, policy.DefaultMeanPrefillTokens,
		"least_load: tokens assumed per request when the real count is unknown")
	fs.Int("least-load-max-waiting-requests", &ll.MaxWaitingRequests, 0,
		"least_load: skip a worker whose waiting requests reach this; 0 disables the cap")

	fs.Enum("power-of-two-load-metric", &cfg.PowerOfTwo.LoadMetric, poweroftwo.MetricExpectedWait, poweroftwo.Metrics,
		"power_of_two: what the two sampled workers are compared by")

	fs.StringList("routing-key-headers", &cfg.RoutingKeyHeaders,
		"Header names read for the routing key before X-SMG-Routing-Key (non-empty UTF-8, at most 128 bytes)")
	fs.Bool("routing-key-override", &cfg.RoutingKeyOverride, false,
		"Sticky sessions on any policy: pin the body's rid (turn/retry suffixes stripped) or the routing key to a worker")

	ph := &cfg.PrefixHash
	fs.Int("prefix-token-count", &ph.PrefixTokenCount, prefixhash.DefaultPrefixTokenCount,
		"prefix_hash: leading tokens hashed (4 characters per token for text)")
	fs.Func("cache-boundaries", "", "ascending token positions such as 2048,8192",
		"prefix_hash: hash the request head up to the deepest of these token positions it reaches", func(v string) error {
			bs, err := parseBoundaries(v)
			if err != nil {
				return err
			}
			ph.CacheBoundaries = bs
			return nil
		})
	fs.Float("prefix-hash-load-factor", &ph.LoadFactor, prefixhash.DefaultLoadFactor,
		"prefix_hash: a ring worker is overloaded above this multiple of the mean in-flight count (>= 1)")
	fs.Int("prefix-hash-balance-abs-threshold", &ph.BalanceAbsThreshold, prefixhash.DefaultBalanceAbsThreshold,
		"prefix_hash: and above the mean plus this many requests; 0 makes the check purely relative")

	mn := &cfg.Manual
	fs.Func("assignment-mode", policy.AssignRandom, "one of "+strings.Join(policy.AssignmentModes, ", "),
		"manual and --routing-key-override: how a key without a usable pin gets a worker ("+strings.Join(policy.AssignmentModes, ", ")+")",
		func(v string) error {
			if err := policy.ValidateAssignmentMode(v); err != nil {
				return errors.New("not a valid choice")
			}
			mn.AssignmentMode = v
			cfg.Sticky.AssignmentMode = v // given explicitly: sticky sessions follow it too
			return nil
		})
	fs.Func("max-idle-secs", strconv.Itoa(int(policy.DefaultMaxIdle/time.Second)), "a number of seconds such as 14400",
		"manual and --routing-key-override: forget a key unused this many seconds", func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return errors.New("not a non-negative number of seconds")
			}
			mn.MaxIdle = time.Duration(f * float64(time.Second))
			cfg.Sticky.MaxIdle = mn.MaxIdle
			return nil
		})
}

// mergeServices keeps the shared services of cur over def.
func mergeServices(def, cur Config) Config {
	def.Logger, def.Rand, def.Clock, def.Metrics, def.Maintenance, def.PDMode, def.KeyLoads =
		cur.Logger, cur.Rand, cur.Clock, cur.Metrics, cur.Maintenance, cur.PDMode, cur.KeyLoads
	return def
}

func parseBoundaries(v string) ([]int, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var bs []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a token position", f)
		}
		bs = append(bs, n)
	}
	if err := prefixhash.ValidateBoundaries(bs); err != nil {
		return nil, err
	}
	return bs, nil
}
