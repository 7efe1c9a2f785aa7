package bucket

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/worker"
)

// Name is the policy's --policy name.
const Name = "bucket"

// Descriptor describes the policy to policy/all's table; its abilities are the methods of
// Builder below.
var Descriptor = policy.Describe(Name, DefaultConfig(), func(cfg Config, s policy.Shared) *Builder { return New(cfg, s.Rand) })

// Timing of the spec.
const (
	// AdjustInterval is how often boundaries are re-checked.
	AdjustInterval = 5 * time.Second
	// Window is the span of the balance check's loads.
	Window = 5 * time.Second
	// slot is the granularity of the load window.
	slot = time.Second
	// slots per window.
	slots = int(Window / slot)
	// InitialMax is the length the initial even split covers; the last range is open-ended.
	InitialMax = 4096
	// recentSizes is how many request sizes the adjustment remembers.
	recentSizes = 4096
)

// Config configures bucket.
type Config struct {
	// BalanceAbsThreshold (--balance-abs-threshold, shared with cache_aware, here in
	// characters or tokens). Default 64.
	BalanceAbsThreshold int
	// BalanceRelThreshold (--balance-rel-threshold), at least 1. Default 1.5.
	BalanceRelThreshold float64
}

// DefaultConfig returns the spec's defaults.
func DefaultConfig() Config { return Config{BalanceAbsThreshold: 64, BalanceRelThreshold: 1.5} }

// Validate reports a setting out of range.
func (c Config) Validate() error {
	if c.BalanceAbsThreshold < 0 {
		return fmt.Errorf("--balance-abs-threshold is %d: give a count >= 0", c.BalanceAbsThreshold)
	}
	if !(c.BalanceRelThreshold >= 1) || math.IsInf(c.BalanceRelThreshold, 1) {
		return fmt.Errorf("--balance-rel-threshold is %v: give a multiple >= 1", c.BalanceRelThreshold)
	}
	return nil
}

// Builder keeps the boundaries, loads and recent sizes of one model across snapshots.
type Builder struct {
	cfg Config
	rnd policy.Rand

	cur   atomic.Int64 // the load slot picks add to; advanced by Maintain
	epoch atomic.Int64 // seconds-slots elapsed, stamped on recent sizes

	sizes     [recentSizes]atomic.Uint64 // epoch<<32 | size
	sizesNext atomic.Uint64

	bounds atomic.Pointer[bounds]

	// Control-plane state (Build and Maintain), ordered by mu.
	mu         sync.Mutex
	loads      map[*worker.Worker]*load
	lastRotate time.Time
	lastAdjust time.Time
	adjusted   bool
	perWorker  float64 // per-worker window load at the last adjustment
}

// load is one worker's characters over the window, by slot, and their running total, so the
// balance check reads one atomic per worker.
type load struct {
	slots [slots]atomic.Int64
	total atomic.Int64
}

func (l *load) add(slot int64, n int64) {
	l.slots[slot].Add(n)
	l.total.Add(n)
}

func (l *load) sum() int64 { return l.total.Load() }

// recycle empties a slot for reuse, taking its characters out of the total, and reports
// whether the total changed.
func (l *load) recycle(slot int64) bool {
	n := l.slots[slot].Swap(0)
	l.total.Add(-n)
	return n != 0
}

// bounds assigns length ranges to workers: owner i takes lengths up to upper[i] inclusive,
// above upper[i-1]; the last owner's upper bound is MaxInt64.
type bounds struct {
	owners []*worker.Worker
	loads  []*load
	upper  []int64
	// order keeps the owners' loads for the balance check; bounds over the same owners
	// share it.
	order *order
}

// New returns a Builder; cfg must be valid and rnd nil selects policy.RuntimeRand.
func New(cfg Config, rnd policy.Rand) *Builder {
	rnd = policy.RandOr(rnd)
	return &Builder{cfg: cfg, rnd: rnd, loads: map[*worker.Worker]*load{}}
}

// Name implements policy.Builder.
func (*Builder) Name() string { return Name }

// Build implements policy.Builder. Boundaries survive a snapshot that keeps the same workers;
// a change of workers starts again from the even split.
func (b *Builder) Build(g policy.Group) policy.Picker {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.bounds.Load()
	if old == nil || !slices.Equal(old.owners, g.Workers) {
		ls := make([]*load, len(g.Workers))
		keep := make(map[*worker.Worker]*load, len(g.Workers))
		for i, w := range g.Workers {
			l := b.loads[w]
			if l == nil {
				l = new(load)
			}
			ls[i], keep[w] = l, l
		}
		b.loads = keep
		owners := slices.Clone(g.Workers)
		var prev *order
		if old != nil {
			// Picks still on the previous order wait, then find it retired and pick from
			// the bounds stored below.
			prev = old.order
			prev.mu.Lock()
			defer prev.mu.Unlock()
		}
		b.bounds.Store(&bounds{owners: owners, loads: ls, upper: evenSplit(len(g.Workers)), order: newOrder(owners, ls, prev)})
		b.adjusted, b.perWorker = false, 0
	}
	return &picker{b: b}
}

func evenSplit(n int) []int64 {
	if n == 0 {
		return nil
	}
	up := make([]int64, n)
	gap := int64(InitialMax / n)
	for i := range up {
		up[i] = int64(i+1)*gap - 1
	}
	up[n-1] = math.MaxInt64
	return up
}

// Bounds returns the current upper bounds (inclusive; the last is MaxInt64), for tests and the
// admin API.
func (b *Builder) Bounds() []int64 {
	if bs := b.bounds.Load(); bs != nil {
		return slices.Clone(bs.upper)
	}
	return nil
}

type picker struct{ b *Builder }

// Pick implements policy.Picker.
func (p *picker) Pick(req *policy.Request) (policy.Result, error) {
	b := p.b
	size := int64(len(req.Tokens))
	if size == 0 {
		size = int64(policy.CountChars(req.Text))
	}
	for {
		bs := b.bounds.Load()
		if len(bs.owners) == 0 {
			return policy.Result{}, policy.ErrNoAvailableWorkers
		}
		o := bs.order
		o.mu.Lock()
		if o.retired { // the owners changed: pick from the new bounds
			o.mu.Unlock()
			continue
		}
		chosen := b.choose(bs, req, size)
		if chosen >= 0 {
			bs.loads[chosen].add(b.cur.Load(), size)
			o.update(chosen)
		}
		o.mu.Unlock()
		if chosen < 0 {
			return policy.Result{}, policy.ErrNoAvailableWorkers
		}
		k := b.sizesNext.Add(1) - 1
		b.sizes[k%recentSizes].Store(uint64(b.epoch.Load())<<32 | uint64(min(size, math.MaxUint32)))
		return policy.Result{Worker: bs.owners[chosen]}, nil
	}
}

// choose returns the place of the owner a request of size takes, -1 for none: its bucket's
// owner, unless the usable owners' window loads are imbalanced, then the least loaded. Of
// several least loaded, the first from a random place on (going round) wins, so ties are
// spread with one random draw. The caller holds the order's mutex.
func (b *Builder) choose(bs *bounds, req *policy.Request, size int64) int {
	o := bs.order
	start := b.rnd.IntN(len(bs.owners))
	o.refresh()
	o.exclude(req)
	defer o.restore()
	least := o.leastFrom(start)
	if least < 0 {
		return -1
	}
	minLoad, maxLoad := o.tree[1].least, o.tree[1].most
	imbalanced := maxLoad-minLoad > int64(b.cfg.BalanceAbsThreshold) && float64(maxLoad) > b.cfg.BalanceRelThreshold*float64(minLoad)
	if !imbalanced {
		if i, _ := slices.BinarySearch(bs.upper, size); i < len(bs.owners) && req.Usable(bs.owners[i]) {
			return i
		}
	}
	return least
}

// Maintain rotates the load window every second and re-checks the boundaries every
// AdjustInterval (policy.Maintainer).
func (b *Builder) Maintain(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastRotate.IsZero() {
		b.lastRotate, b.lastAdjust = now, now
		return
	}
	// Check before rotating, so the check sees the whole window it is due for.
	if now.Sub(b.lastAdjust) >= AdjustInterval {
		b.lastAdjust = now
		b.adjust()
	}
	for now.Sub(b.lastRotate) >= slot {
		b.lastRotate = b.lastRotate.Add(slot)
		b.rotate((b.cur.Load() + 1) % int64(slots))
		b.epoch.Add(1)
	}
}

// rotate makes next the slot picks add to, emptied of what it held a window ago. The caller
// holds b.mu.
func (b *Builder) rotate(next int64) {
	bs := b.bounds.Load()
	if bs == nil {
		b.cur.Store(next)
		return
	}
	o := bs.order
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, l := range o.loads {
		if l.recycle(next) {
			o.update(i)
		}
	}
	b.cur.Store(next)
}

// adjust recomputes the boundaries from the window's request sizes when the spec says to.
func (b *Builder) adjust() {
	bs := b.bounds.Load()
	if bs == nil || len(bs.owners) == 0 {
		return
	}
	var total int64
	for _, l := range bs.loads {
		total += l.sum()
	}
	perWorker := float64(total) / float64(len(bs.owners))
	if total == 0 {
		return
	}
	if b.adjusted && perWorker <= 2*b.perWorker && b.perWorker <= 2*perWorker {
		return // within a factor of two of the last adjustment
	}
	epoch := b.epoch.Load()
	var sizes []int64
	for i := range b.sizes {
		v := b.sizes[i].Load()
		if v == 0 {
			continue
		}
		if e := int64(v >> 32); epoch-e < int64(slots) {
			sizes = append(sizes, int64(v&math.MaxUint32))
		}
	}
	if len(sizes) == 0 {
		return
	}
	b.adjusted, b.perWorker = true, perWorker
	b.bounds.Store(&bounds{owners: bs.owners, loads: bs.loads, upper: shareBounds(sizes, len(bs.owners)), order: bs.order})
}

// shareBounds cuts the sorted sizes into n ranges carrying similar shares of the total size:
// range i ends at the last request before the running total exceeds (i+1)/n of it. Bounds
// are strictly ascending; the last is open-ended.
//
// A bound is a size, so requests of equal size cannot be split between two ranges: when the
// running total reaches its target inside a run of equal sizes, the bound goes below or
// above the whole run, whichever leaves the range's total closer to the target (above on a
// tie). Cutting at the run's size regardless, as a plain running total would, puts the
// whole run below the bound: with a bimodal workload whose long mode holds most of the
// characters, every request went to the first range.
func shareBounds(sizes []int64, n int) []int64 {
	slices.Sort(sizes)
	var total int64
	for _, s := range sizes {
		total += s
	}
	up := make([]int64, n)
	var run int64
	j := 0
	for i := range n - 1 {
		target := total * int64(i+1) / int64(n)
		for j < len(sizes) && run+sizes[j] <= target {
			run += sizes[j]
			j++
		}
		cut := int64(0)
		if j > 0 {
			cut = sizes[j-1]
		}
		if j > 0 && j < len(sizes) && sizes[j] == cut {
			// The target falls inside the run of cut-sized requests sizes[lo:hi].
			lo, hi := j, j
			for lo > 0 && sizes[lo-1] == cut {
				lo--
			}
			for hi < len(sizes) && sizes[hi] == cut {
				hi++
			}
			below, above := run-cut*int64(j-lo), run+cut*int64(hi-j)
			if target-below < above-target {
				cut = 0
				if lo > 0 {
					cut = sizes[lo-1]
				}
			}
		}
		if i > 0 && cut <= up[i-1] {
			cut = up[i-1] + 1
		}
		up[i] = cut
	}
	up[n-1] = math.MaxInt64
	return up
}

// RoutesLeg makes the policy a policy.LegRestricted: its buckets are prefill lengths, so it
// routes only the prefill leg of PD disaggregation.
func (*Builder) RoutesLeg(leg policy.Leg) bool { return leg == policy.LegPrefill }

// MaintainWeakly implements policy.Maintainer.
func (b *Builder) MaintainWeakly() func(now time.Time) bool { return policy.Weakly(b) }
