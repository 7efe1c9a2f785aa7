package prefixhash

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/ring"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "prefix_hash"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, DefaultConfig(), func(cfg Config, s policy.Shared) *Builder {
	cfg.Metrics = s.Metrics
	return New(cfg, s.Rand)
})

// Defaults of the spec.
const (
	DefaultPrefixTokenCount    = 256
	DefaultLoadFactor          = 1.25
	DefaultBalanceAbsThreshold = 10
	// CharsPerToken converts token counts to characters for requests that carry only text.
	CharsPerToken = 4
	// MaxCacheBoundaries bounds --cache-boundaries, so a pick keeps its levels on the stack.
	MaxCacheBoundaries = 16
)

// Branches of smg_prefix_hash_policy_branch_total.
const (
	BranchRingHit           = "ring_hit"
	BranchLoadBalanceWalk   = "load_balance_walk"
	BranchFallbackLeastLoad = "fallback_least_load"
	BranchNoRoutingKey      = "no_routing_key"
	BranchNoHealthyWorkers  = "no_healthy_workers"
)

// Config configures prefix_hash.
type Config struct {
	// PrefixTokenCount (--prefix-token-count) is how many leading tokens are hashed (4 ×
	// as many characters for text). Default 256.
	PrefixTokenCount int
	// CacheBoundaries (--cache-boundaries) are ascending token positions; when set, the key
	// is the head up to the deepest boundary the request reaches. Default none.
	CacheBoundaries []int
	// LoadFactor (--prefix-hash-load-factor): a target is overloaded above this multiple of
	// the fleet's mean in-flight count (and the absolute margin). Default 1.25; at least 1.
	LoadFactor float64
	// BalanceAbsThreshold (--prefix-hash-balance-abs-threshold) is the absolute margin over
	// the mean; 0 makes the check purely relative. Default 10.
	BalanceAbsThreshold int
	// Metrics receives smg_prefix_hash_policy_branch_total. Nil: a private set.
	Metrics *metrics.Set
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config {
	return Config{
		PrefixTokenCount:    DefaultPrefixTokenCount,
		LoadFactor:          DefaultLoadFactor,
		BalanceAbsThreshold: DefaultBalanceAbsThreshold,
	}
}

// Validate reports the first setting out of range, naming its flag.
func (c Config) Validate() error {
	if c.PrefixTokenCount < 1 {
		return fmt.Errorf("--prefix-token-count is %d: give a positive token count (default %d)", c.PrefixTokenCount, DefaultPrefixTokenCount)
	}
	if math.IsNaN(c.LoadFactor) || c.LoadFactor < 1 || math.IsInf(c.LoadFactor, 0) {
		return fmt.Errorf("--prefix-hash-load-factor is %v: give a number >= 1 (default %v)", c.LoadFactor, DefaultLoadFactor)
	}
	if c.BalanceAbsThreshold < 0 {
		return fmt.Errorf("--prefix-hash-balance-abs-threshold is %d: give a request count >= 0 (default %d; 0 makes the check purely relative)",
			c.BalanceAbsThreshold, DefaultBalanceAbsThreshold)
	}
	return ValidateBoundaries(c.CacheBoundaries)
}

// ValidateBoundaries checks --cache-boundaries: positive, strictly ascending token positions,
// at most MaxCacheBoundaries of them.
func ValidateBoundaries(bs []int) error {
	if len(bs) > MaxCacheBoundaries {
		return fmt.Errorf("--cache-boundaries has %d positions: give at most %d", len(bs), MaxCacheBoundaries)
	}
	for i, b := range bs {
		if b < 1 || (i > 0 && b <= bs[i-1]) {
			return fmt.Errorf("--cache-boundaries %v: give positive, strictly ascending token positions such as 2048,8192", bs)
		}
	}
	return nil
}

// Builder builds prefix_hash pickers and keeps the previous ring for fast rebuilds.
type Builder struct {
	cfg   Config
	rnd   policy.Rand
	rings *ring.Builder
	br    branchCounters
}

type branchCounters struct {
	hit, walk, fallback, noKey, none *metrics.Counter
}

// New returns a Builder; cfg must be valid and rnd nil selects policy.RuntimeRand.
func New(cfg Config, rnd policy.Rand) *Builder {
	rnd, cfg.Metrics = policy.RandOr(rnd), policy.MetricsOr(cfg.Metrics)
	c := policy.BranchCounters(cfg.Metrics, `smg_prefix_hash_policy_branch_total`)
	return &Builder{cfg: cfg, rnd: rnd, rings: ring.NewBuilder(), br: branchCounters{
		hit: c(BranchRingHit), walk: c(BranchLoadBalanceWalk), fallback: c(BranchFallbackLeastLoad),
		noKey: c(BranchNoRoutingKey), none: c(BranchNoHealthyWorkers),
	}}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder.
func (b *Builder) Build(g policy.Group) policy.Picker {
	return &picker{
		cfg:     &b.cfg,
		workers: g.Workers,
		ring:    b.rings.Build(g.Workers),
		mean:    policy.NewFleetMean(g.Workers),
		rnd:     b.rnd,
		br:      &b.br,
	}
}

type picker struct {
	cfg     *Config
	workers []*worker.Worker
	ring    *ring.Ring
	mean    *policy.FleetMean
	rnd     policy.Rand
	br      *branchCounters
}

func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	var hashes [MaxCacheBoundaries + 1]uint64
	levels := p.keyHashes(req, &hashes)
	if levels == 0 {
		return p.leastLoaded(req, p.br.noKey)
	}
	target := p.ring.Lookup(req, hashes[0])
	if target == nil {
		return p.leastLoaded(req, p.br.fallback)
	}
	if !p.overloaded(target) {
		p.br.hit.Inc()
		return policy.Result{Worker: target}, nil
	}
	// Overloaded: shallower boundaries first, then the least-loaded worker that is not
	// overloaded, else the ring target anyway.
	p.br.walk.Inc()
	for _, h := range hashes[1:levels] {
		if w := p.ring.Lookup(req, h); w != nil && !p.overloaded(w) {
			return policy.Result{Worker: w}, nil
		}
	}
	if w := policy.LeastInFlight(req, p.workers, p.rnd, p.limit()); w != nil {
		return policy.Result{Worker: w}, nil
	}
	return policy.Result{Worker: target}, nil
}

// overloaded applies the spec's load check. A count within the absolute margin can never
// exceed mean + margin, so the fleet mean is read only for busy targets.
func (p *picker) overloaded(w *worker.Worker) bool {
	n := w.InFlight.Load()
	if n <= int64(p.cfg.BalanceAbsThreshold) {
		return false
	}
	return float64(n) > p.limitFor(p.mean.Mean())
}

// limit is the in-flight count above which a worker is overloaded right now.
func (p *picker) limit() float64 { return p.limitFor(p.mean.Mean()) }

func (p *picker) limitFor(mean float64) float64 {
	return max(p.cfg.LoadFactor*mean, mean+float64(p.cfg.BalanceAbsThreshold))
}

func (p *picker) leastLoaded(req *policy.Request, branch *metrics.Counter) (policy.Result, error) {
	if w := policy.LeastInFlight(req, p.workers, p.rnd, policy.NoHotLimit); w != nil {
		branch.Inc()
		return policy.Result{Worker: w}, nil
	}
	p.br.none.Inc()
	return policy.Result{}, policy.ErrNoAvailableWorkers
}

// keyHashes writes the hashes to try into hs, deepest head first, and returns how many.
func (p *picker) keyHashes(req *policy.Request, hs *[MaxCacheBoundaries + 1]uint64) int {
	if policy.ValidRoutingKey(req.RoutingKey) {
		hs[0] = ring.HashBytes(req.RoutingKey)
		return 1
	}
	bs := p.cfg.CacheBoundaries
	if len(req.Tokens) > 0 {
		ts := req.Tokens
		n := 0
		for i := len(bs) - 1; i >= 0; i-- {
			if len(ts) >= bs[i] {
				hs[n] = ring.HashTokens(ts[:bs[i]])
				n++
			}
		}
		if n == 0 {
			hs[0] = ring.HashTokens(ts[:min(len(ts), p.cfg.PrefixTokenCount)])
			n = 1
		}
		return n
	}
	if len(req.Text) > 0 {
		text := req.Text
		n := 0
		if len(bs) > 0 {
			// Byte offsets of the boundaries the text reaches, found in one scan.
			var cuts [MaxCacheBoundaries]int
			reached := charCuts(text, bs, &cuts)
			for i := reached - 1; i >= 0; i-- {
				hs[n] = ring.HashBytes(text[:cuts[i]])
				n++
			}
		}
		if n == 0 {
			hs[0] = ring.HashBytes(text[:cutChars(text, p.cfg.PrefixTokenCount*CharsPerToken)])
			n = 1
		}
		return n
	}
	return 0
}

// cutChars returns the byte length of the first n UTF-8 characters of b (all of b if shorter).
func cutChars(b []byte, n int) int {
	if n >= len(b) {
		return len(b) // n characters take at least n bytes
	}
	if isASCII(b[:n]) && b[n]&0xC0 != 0x80 {
		return n // the common case, checked 8 bytes at a time
	}
	chars := 0
	for i, c := range b {
		if c&0xC0 != 0x80 { // a byte that starts a character
			if chars == n {
				return i
			}
			chars++
		}
	}
	return len(b)
}

func isASCII(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// charCuts finds the byte offsets at which text reaches each boundary (in tokens, 4 characters
// each) and returns how many boundaries it reaches.
func charCuts(text []byte, bs []int, cuts *[MaxCacheBoundaries]int) int {
	reached, chars := 0, 0
	for i, c := range text {
		if c&0xC0 == 0x80 {
			continue
		}
		for reached < len(bs) && chars == bs[reached]*CharsPerToken {
			cuts[reached] = i
			reached++
		}
		if reached == len(bs) {
			return reached
		}
		chars++
	}
	for reached < len(bs) && chars == bs[reached]*CharsPerToken {
		cuts[reached] = len(text)
		reached++
	}
	return reached
}
