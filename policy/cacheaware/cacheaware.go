package cacheaware

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/radix"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "cache_aware"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below; an instance no flag tunes gets BuiltinConfig.
var Descriptor = policy.Describe(Name, BuiltinConfig(), func(cfg Config, s policy.Shared) *Builder {
	cfg.Metrics, cfg.Observer, cfg.Clock = s.Metrics, s.TreeObserver, s.Clock
	return New(cfg, s.Rand)
})

// Branches of smg_cache_aware_policy_branch_total.
const (
	BranchTreeMatch            = "tree_match"
	BranchSpill                = "spill"
	BranchExpectedWaitFallback = "expected_wait_fallback"
)

// Builder owns one model's trees, which survive snapshots.
type Builder struct {
	cfg    Config
	rnd    policy.Rand
	scorer *score.Scorer
	// orders are the whole-fleet orders of the pickers, one per snapshot.
	orders score.Succession

	text   *radix.TextTree
	tokens *radix.TokenTree
	// clock is the trees' LRU clock, counted in prompt tokens: each pick advances it by what
	// it adds to its engine's LRU order (advanceClock), so the age of a holder's stamp tells
	// whether its engine still caches the prefix (liveness.go). It starts at peerStamp + 1.
	clock atomic.Int64

	// placements is the hash placement index (--cache-index hash), nil in tree mode.
	placements *placementIndex
	// unreported remembers, in event mode, the blocks sent to workers whose engines have not
	// reported them yet (unreported.go).
	unreported unreported
	// now stamps placements and unreported blocks: a coarse clock (Unix nanoseconds) that
	// Maintain advances every second, so the hot path reads no wall clock.
	now atomic.Int64

	br branches

	// model is the model the instance routes, set at the first Build (the observer needs it).
	model atomic.Pointer[string]

	// Control-plane state, touched by Build and Maintain only (mu orders them).
	mu        sync.Mutex
	owners    []*worker.Worker // tenant index → the worker that holds it
	ownerGen  []uint64         // tenant index → the last Build whose candidates held it
	buildGen  uint64           // counts Builds
	gauges    *treeGauges
	lastEvict time.Time
}

type branches struct {
	match, spill, miss *metrics.Counter
	// events counts the decisions made in event mode (their branch is counted too); home
	// those of them that sent a prompt no engine held back to its home (events.go).
	events, home *metrics.Counter
	// predicted and prompt sum, over event-mode picks, the prompt tokens the chosen
	// engine reported holding and the prompts' tokens: predicted / prompt is the hit rate the
	// engines' events foretold, to set beside the hit they report (cached tokens).
	predicted, prompt *metrics.Counter
	// treePredicted and treePrompt are the same sums over the token tree's picks: the hit
	// the approximate tree foretold.
	treePredicted, treePrompt *metrics.Counter
}

type treeGauges struct {
	chars, tokens, textTenants, tokenTenants, placements *metrics.Gauge
}

// New returns a Builder; cfg must be valid and rnd nil selects policy.RuntimeRand. The
// expected wait uses least_load's default tuning, as the spec says.
func New(cfg Config, rnd policy.Rand) *Builder {
	rnd, cfg.Metrics = policy.RandOr(rnd), policy.MetricsOr(cfg.Metrics)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	text, err := radix.NewTextTree(radix.DefaultTextConfig())
	if err != nil {
		panic(err) // the default radix.Config is valid
	}
	tokens, err := radix.NewTokenTree(radix.DefaultTokenConfig())
	if err != nil {
		panic(err)
	}
	c := policy.BranchCounters(cfg.Metrics, `smg_cache_aware_policy_branch_total`)
	b := &Builder{
		cfg: cfg, rnd: rnd, scorer: score.New(score.DefaultConfig()),
		text: text, tokens: tokens,
		br: branches{match: c(BranchTreeMatch), spill: c(BranchSpill), miss: c(BranchExpectedWaitFallback),
			events:        cfg.Metrics.GetOrCreateCounter(`smg_cache_aware_event_mode_picks_total`),
			home:          cfg.Metrics.GetOrCreateCounter(`smg_cache_aware_event_mode_home_picks_total`),
			predicted:     cfg.Metrics.GetOrCreateCounter(`smg_cache_aware_event_mode_predicted_cached_tokens_total`),
			prompt:        cfg.Metrics.GetOrCreateCounter(`smg_cache_aware_event_mode_prompt_tokens_total`),
			treePredicted: cfg.Metrics.GetOrCreateCounter(`smg_cache_aware_tree_predicted_cached_tokens_total`),
			treePrompt:    cfg.Metrics.GetOrCreateCounter(`smg_cache_aware_tree_prompt_tokens_total`)},
	}
	b.clock.Store(peerStamp + 1) // local stamps are above a peer's
	b.now.Store(cfg.Clock.Now().UnixNano())
	if cfg.CacheIndex == IndexHash {
		b.placements = newPlacementIndex()
	}
	return b
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Config returns the builder's configuration.
func (b *Builder) Config() Config { return b.cfg }

// TextTree and TokenTree return the model's trees, for tests, the admin API and mesh sync.
func (b *Builder) TextTree() *radix.TextTree   { return b.text }
func (b *Builder) TokenTree() *radix.TokenTree { return b.tokens }

// Build implements policy.Builder: it purges the tenancy of workers that left the registry
// and returns a picker over g.
func (b *Builder) Build(g policy.Group) policy.Picker {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gauges == nil {
		b.gauges = newTreeGauges(b.cfg.Metrics, g.Model)
		model := g.Model
		b.model.Store(&model)
	}
	b.purgeDeparted(g)
	bound := len(b.owners) // covers every candidate's index
	byIndex := make([]*worker.Worker, bound)
	pos := make([]int32, bound)
	for i, w := range g.Workers {
		byIndex[w.Index], pos[w.Index] = w, int32(i)
	}
	p := &picker{b: b, workers: g.Workers, byIndex: byIndex, pos: pos, mean: policy.NewFleetMean(g.Workers), rate: b.scorer.NewFleetRate(g.Workers),
		turns: b.orders.Turns(g.Workers, b.rnd), events: newEventMode(b.cfg.Events, g)}
	p.ranking = b.orders.Succeed(b.scorer.NewRanking(p.workers, p.turns, nil))
	return p
}

// purgeDeparted removes from the trees every tenant whose worker is no longer registered, and
// records the current owner of each tenant index. A worker that is only unavailable keeps
// its tenancy: it will hold its cache again when it recovers. A candidate of g is registered:
// only the owners that are not are looked up in the snapshot.
func (b *Builder) purgeDeparted(g policy.Group) {
	b.buildGen++
	for _, w := range g.Workers {
		if n := int(w.Index) + 1; n > len(b.owners) {
			b.owners = append(b.owners, make([]*worker.Worker, n-len(b.owners))...)
			b.ownerGen = append(b.ownerGen, make([]uint64, n-len(b.ownerGen))...)
		}
		if o := b.owners[w.Index]; o != nil && o != w {
			// The index was reused before a Build saw its old owner leave.
			b.removeTenant(radix.Tenant(w.Index))
		}
		b.owners[w.Index], b.ownerGen[w.Index] = w, b.buildGen
	}
	for i, w := range b.owners {
		if w != nil && b.ownerGen[i] != b.buildGen && (g.Snapshot == nil || g.Snapshot.ByID(w.ID) != w) {
			b.removeTenant(radix.Tenant(i))
			b.owners[i] = nil
		}
	}
}

// removeTenant removes a departed worker's tenancy from both trees.
func (b *Builder) removeTenant(t radix.Tenant) {
	b.text.RemoveTenant(t)
	b.tokens.RemoveTenant(t)
}

// Maintain evicts trees over budget every EvictionInterval and refreshes the tree gauges
// (policy.Maintainer).
func (b *Builder) Maintain(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now.Store(now.UnixNano())
	if b.cfg.EvictionInterval <= 0 || now.Sub(b.lastEvict) < b.cfg.EvictionInterval {
		return
	}
	b.lastEvict = now
	if b.placements != nil {
		b.placements.sweep(now.UnixNano() - int64(b.cfg.CacheTTL))
		if b.gauges != nil {
			b.gauges.placements.Set(float64(b.placements.entries.Load()))
		}
	}
	if b.text.Size() > b.cfg.MaxTreeSize {
		b.text.Evict(b.cfg.MaxTreeSize)
	}
	if b.tokens.Size() > b.cfg.MaxTreeSize {
		b.tokens.Evict(b.cfg.MaxTreeSize)
	}
	if b.gauges != nil {
		b.gauges.chars.Set(float64(b.text.Size()))
		b.gauges.tokens.Set(float64(b.tokens.Size()))
		var textTenants, tokenTenants int
		for i, w := range b.owners {
			if w == nil {
				continue
			}
			if b.text.TenantChars(radix.Tenant(i)) > 0 {
				textTenants++
			}
			if b.tokens.TenantChars(radix.Tenant(i)) > 0 {
				tokenTenants++
			}
		}
		b.gauges.textTenants.Set(float64(textTenants))
		b.gauges.tokenTenants.Set(float64(tokenTenants))
	}
}

func newTreeGauges(set *metrics.Set, model string) *treeGauges {
	return &treeGauges{
		chars:        set.GetOrCreateGauge(`smg_cache_tree_chars{model="`+escape(model)+`"}`, nil),
		tokens:       set.GetOrCreateGauge(`smg_cache_tree_tokens{model="`+escape(model)+`"}`, nil),
		textTenants:  set.GetOrCreateGauge(`smg_cache_tree_tenants{model="`+escape(model)+`",tree="string"}`, nil),
		tokenTenants: set.GetOrCreateGauge(`smg_cache_tree_tenants{model="`+escape(model)+`",tree="token"}`, nil),
		placements:   set.GetOrCreateGauge(`smg_cache_placement_entries{model="`+escape(model)+`"}`, nil),
	}
}

// escape makes a model id safe inside a Prometheus label value.
func escape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

type picker struct {
	b       *Builder
	workers []*worker.Worker
	byIndex []*worker.Worker // tenant → available candidate; nil for others
	mean    *policy.FleetMean
	rate    *policy.FleetRate
	// pos[w.Index] is w's place in workers. turns records when each was last picked: where
	// load alone decides over the whole fleet (a miss, a spill), workers equal for all the
	// gateway can tell are taken in turn (score.Scorer.LowestInTurn, as least_load does).
	pos   []int32
	turns *score.Turns
	// ranking keeps the workers in the scorer's order as their load changes: a whole-fleet
	// choice with no hot limit (a miss) does not rescan them.
	ranking *score.Ranking
	// events is the model's KV-event index when every worker publishes events (events.go);
	// nil: the approximate tree.
	events *eventMode
}

// lowest is the worker of the whole fleet with the lowest expected wait, skipping those with
// more than hotAbove requests in flight, equal workers taken in turn (score.Scorer.LowestInTurn).
func (p *picker) lowest(req *policy.Request, rate score.Rate, hotAbove float64) *worker.Worker {
	w, _ := p.ranking.Pick(req, rate, p.b.rnd, hotAbove)
	return w
}

// Pick implements policy.Picker.
func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	c := chooserPool.Get().(*chooser)
	c.p, c.req = p, req
	defer c.release()
	b := p.b
	switch {
	case p.events != nil && p.pickByEvents(req, c):
	case b.placements != nil:
		c.chosen = p.pickByPlacement(req, c)
	case len(req.Tokens) >= b.cfg.BlockSize:
		// Whole pages only: engines reuse KV cache in pages.
		n := len(req.Tokens) / b.cfg.BlockSize * b.cfg.BlockSize
		c.pageSize, c.unitsPerToken, c.now = b.cfg.BlockSize, 1, b.clock.Load()
		b.tokens.MatchAndInsert(req.Tokens[:n], c.now, c)
	case len(req.Tokens) == 0 && len(req.Text) > 0:
		c.pageSize, c.unitsPerToken, c.now = 1, charsPerToken, b.clock.Load()
		b.text.MatchAndInsert(req.Text, c.now, c)
	default:
		// Nothing to match (no text, or tokens shorter than one page): load decides and
		// nothing is recorded.
		c.chosen = p.lowest(req, b.scorer.RateOf(p.rate), policy.NoHotLimit)
	}
	if c.chosen == nil {
		return policy.Result{}, policy.ErrNoAvailableWorkers
	}
	p.turns.Note(int(p.pos[c.chosen.Index]))
	if b.cfg.Observer != nil && c.pageSize > 0 { // trees only: the mesh does not sync placements
		b.observe(req, c.chosen)
	}
	return policy.Result{Worker: c.chosen, CacheMatched: c.matched, CacheInput: c.input}, nil
}

// observe tells the observer of the prefix just recorded for w.
func (b *Builder) observe(req *policy.Request, w *worker.Worker) {
	model := ""
	if m := b.model.Load(); m != nil {
		model = *m
	}
	if len(req.Tokens) >= b.cfg.BlockSize {
		b.cfg.Observer.ObserveTokens(model, req.Tokens[:len(req.Tokens)/b.cfg.BlockSize*b.cfg.BlockSize], w)
	} else if len(req.Text) > 0 {
		b.cfg.Observer.ObserveText(model, req.Text, w)
	}
}

// Record inserts the request's prefix for the worker that served it when a retry moved the
// request off the worker Pick chose (policy.Recorder).
func (p *picker) Record(req *policy.Request, served *worker.Worker) {
	b := p.b
	if p.events != nil {
		p.recordSent(req, served)
	}
	switch {
	case b.placements != nil:
		b.recordPlacement(req, served)
		return
	case len(req.Tokens) >= b.cfg.BlockSize:
		n := len(req.Tokens) / b.cfg.BlockSize * b.cfg.BlockSize
		b.tokens.Insert(req.Tokens[:n], radix.Tenant(served.Index), b.clock.Add(int64(n)))
	case len(req.Tokens) == 0 && len(req.Text) > 0:
		b.text.Insert(req.Text, radix.Tenant(served.Index), b.clock.Add(int64(len(req.Text)/charsPerToken)))
	default:
		return
	}
	if b.cfg.Observer != nil {
		b.observe(req, served)
	}
}

// decide applies the spill gate to the usable holders of a prefix (tree or placement): the
// lowest expected wait among those not hot takes the request (tree_match); when every holder
// is hot, or none is usable, the lowest expected wait that is not hot does, or the lowest of
// all when everyone is (spill). A holder is hot past the fleet mean by the smaller of
// --balance-abs-threshold and what the hit is worth (hitWorth of the matched share, ratio).
//
// A doubtful hit must also not queue. doubt (liveness.go) is q, how likely the holder's
// engine has dropped the prefix, from the holder's stamp on it: 0 up to half its horizon, 1
// at it. A holder that is the prefix's only candidate is passed over (spill, to the
// least-loaded worker) when that worker has nothing awaiting its first token and the work
// awaiting its first token on the holder, each request costing its unmatched share and, with
// probability q, its matched one (awaiting work × (1 - ratio × (1 - q))), exceeds what the
// hit saves in expectation (savedTokens × (1 - q)). A recent hit keeps the gate alone.
//
// Why: the spill gate counts requests in flight, most of them decoding, so a holder would
// queue a run of turns whose prefixes are gone, each a whole prefill (an engine completes a
// batch of conversations at once, and their next turns come round together). The rule is
// weighed by q and kept to a sole candidate because a shared prefix's replicas are several
// and spilling them loses hits (TestSharedPrefixSaturationKeepsHits), and it spills only to
// a free worker because a busy one computes the prefix anew behind its own queue. The
// measurements are in docs/differences.md.
func (p *picker) decide(req *policy.Request, cands []*worker.Worker, rate score.Rate, ratio, savedTokens float64, m *radix.Match, now int64) *worker.Worker {
	b := p.b
	mean := p.mean.Mean()
	hot := max(b.cfg.BalanceRelThreshold*mean, mean+min(float64(b.cfg.BalanceAbsThreshold), hitWorth(ratio)))
	var w *worker.Worker
	if len(cands) > 0 {
		w = b.scorer.LowestAt(req, cands, rate, b.rnd, hot)
	}
	if w != nil {
		if q := p.doubt(w, m, now); q > 0 && len(cands) == 1 {
			// The awaiting requests there are doubtful hits too: each costs its unmatched
			// share and, with probability q, the matched one.
			saved := savedTokens * (1 - q)
			if aw := b.scorer.AwaitingWork(w) * (1 - ratio*(1-q)); aw > saved {
				// Only to a worker free of prefills: on a busy fleet the spill would compute
				// the prefix anew behind another queue.
				if best := p.lowest(req, rate, policy.NoHotLimit); best != nil && b.scorer.AwaitingWork(best) == 0 {
					b.br.spill.Inc()
					return best
				}
			}
		}
		b.br.match.Inc()
		return w
	}
	if w = p.lowest(req, rate, hot); w == nil {
		w = p.lowest(req, rate, policy.NoHotLimit)
	}
	if w != nil {
		b.br.spill.Inc()
	}
	return w
}

// chooser runs the decision inside the tree's descent. Pooled: a Chooser handed to the tree
// as an interface would otherwise escape to the heap on every pick.
type chooser struct {
	p        *picker
	req      *policy.Request
	pageSize int
	// unitsPerToken converts the tree's units to prompt tokens for the clock: 1 for the
	// token tree, charsPerToken for the text tree.
	unitsPerToken int
	// now is the clock when the pick began: the stamp its path gets.
	now    int64
	chosen *worker.Worker
	// matched and input are the longest match found and the prompt's length, in the
	// matching's units (policy.Result).
	matched, input int
	cands          [radix.MaxMatchTenants]*worker.Worker
	// Event mode's scratch, kept across picks: per-slot match depths, the prompt's block
	// hashes, and the worker each block was last sent to.
	depth  []uint32
	hashes []uint64
	sent   []*worker.Worker
}

var chooserPool = sync.Pool{New: func() any { return new(chooser) }}

func (c *chooser) release() {
	clear(c.sent) // no worker kept alive by a pooled chooser
	*c = chooser{depth: c.depth, hashes: c.hashes, sent: c.sent}
	chooserPool.Put(c)
}

// hitWorth is how many requests more than the fleet mean a holder may have in flight before a
// request that matches the share ratio of its prompt there is better served elsewhere: on the
// holder it costs (1-ratio) of a prefill and so, about, does each request queued there (they
// hit too); elsewhere it costs a whole prefill. The holder's extra queue, (n - mean) ×
// (1-ratio), outweighs the saving, ratio, beyond ratio/(1-ratio) requests: 1 at a half match,
// 15.7 at the 94% of the routing-quality suite's prompts. A whole match is worth any queue
// (--balance-abs-threshold still bounds it); docs/differences.md says how the spec differs.
func hitWorth(ratio float64) float64 {
	if ratio >= 1 {
		return math.Inf(1)
	}
	return ratio / (1 - ratio)
}

// Choose implements radix.Chooser; it runs under the shard's lock.
func (c *chooser) Choose(m radix.Match) (radix.Tenant, bool) {
	p, b, req := c.p, c.p.b, c.req
	matched := m.MatchedChars / c.pageSize * c.pageSize
	ratio := 0.0
	if m.InputChars > 0 {
		ratio = float64(matched) / float64(m.InputChars)
	}
	var w *worker.Worker
	rate := b.scorer.RateOf(p.rate)
	if ratio > b.cfg.CacheThreshold && matched > 0 {
		n := 0
		for _, t := range m.Tenants {
			if int(t) < len(p.byIndex) {
				if h := p.byIndex[t]; h != nil && req.Usable(h) {
					c.cands[n] = h
					n++
				}
			}
		}
		w = p.decide(req, c.cands[:n], rate, ratio, float64(matched)/float64(c.unitsPerToken), &m, c.now)
	} else {
		if w = p.lowest(req, rate, policy.NoHotLimit); w != nil {
			b.br.miss.Inc()
		}
	}
	c.chosen, c.matched, c.input = w, matched, m.InputChars
	if w == nil {
		return 0, false
	}
	if c.unitsPerToken == 1 { // the token tree: its units are the engines' tokens
		b.br.treePrompt.Add(len(req.Tokens))
		if slices.Contains(m.Tenants, radix.Tenant(w.Index)) {
			b.br.treePredicted.Add(matched)
		}
	}
	c.advanceClock(m, matched, w)
	return radix.Tenant(w.Index), true
}

// ReadsLoad marks the policy as a policy.LoadReader: its picks read load reports.
func (*Builder) ReadsLoad() {}

// MaintainWeakly implements policy.Maintainer.
func (b *Builder) MaintainWeakly() func(now time.Time) bool { return policy.Weakly(b) }
