package loadgen

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// budget decides whether another request may start: a count limit, a deadline, or both.
type budget struct {
	limit    int64     // 0: no count limit
	deadline time.Time // zero: no deadline
	issued   atomic.Int64
}

func (b *budget) take() bool {
	if !b.deadline.IsZero() && !time.Now().Before(b.deadline) {
		return false
	}
	return b.limit == 0 || b.issued.Add(1) <= b.limit
}

// driver runs requests from src through cl and records them into client states.
type driver struct {
	cl       *client
	src      source
	want     bool // src.wantsAnswer()
	runStart time.Time
	prog     *progress // nil: no progress display
}

// send performs one request on st and tells the source and the progress display.
func (d *driver) send(st *clientState, it *item) {
	s := d.cl.do(st, it, d.runStart, d.want)
	d.src.done(it, outcome{ok: s.fail == failNone, answer: st.answer, outputTokens: s.outputTokens})
	if d.prog != nil {
		d.prog.add(s.fail == failNone)
	}
}

// closedLoop runs one goroutine per state, each sending its next request as soon as the
// previous one finished, until the budget or ctx ends.
func (d *driver) closedLoop(ctx context.Context, states []*clientState, b *budget) {
	var wg sync.WaitGroup
	for _, st := range states {
		wg.Go(func() {
			for ctx.Err() == nil && b.take() {
				it, err := d.src.next(ctx)
				if err != nil {
					return
				}
				d.send(st, it)
			}
		})
	}
	wg.Wait()
}

// openLoop starts requests on a fixed schedule of arrival times, independent of how fast
// answers come (so a slow server builds a queue instead of slowing the load), with at most
// pool's capacity in flight. Arrival times are absolute offsets from runStart: a dispatcher
// that fell behind (timer granularity, a full pool) catches up in a burst, keeping the
// average rate.
func (d *driver) openLoop(ctx context.Context, pool *statePool, b *budget, rate float64, arrival ArrivalKind, seed int64) {
	gaps := rand.New(rand.NewPCG(uint64(seed), streamArrival))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var at time.Duration
	for ctx.Err() == nil {
		if wait := at - time.Since(d.runStart); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if !b.take() {
			return
		}
		st := pool.acquire(ctx)
		if st == nil {
			return
		}
		it, err := d.src.next(ctx)
		if err != nil {
			pool.release(st)
			return
		}
		wg.Go(func() {
			d.send(st, it)
			pool.release(st)
		})
		at += nextGap(gaps, rate, arrival)
	}
}

// streamArrival is the random stream of inter-arrival gaps.
const streamArrival = 1 << 62

// nextGap draws the time to the next arrival.
func nextGap(rng *rand.Rand, rate float64, arrival ArrivalKind) time.Duration {
	mean := float64(time.Second) / rate
	if arrival == ArrivalConstant {
		return time.Duration(mean)
	}
	return time.Duration(rng.ExpFloat64() * mean)
}

// statePool hands out client states, at most cap at a time when capped. Every state it ever
// made is kept in all, so Run can merge their recorders after the run.
type statePool struct {
	sem      chan struct{} // nil: no cap
	newState func() *clientState
	mu       sync.Mutex
	free     []*clientState
	all      []*clientState
}

func newStatePool(capacity int, newState func() *clientState) *statePool {
	p := &statePool{newState: newState}
	if capacity > 0 {
		p.sem = make(chan struct{}, capacity)
	}
	return p
}

// acquire waits for a free slot; nil when ctx ended first.
func (p *statePool) acquire(ctx context.Context) *clientState {
	if p.sem != nil {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		st := p.free[n-1]
		p.free = p.free[:n-1]
		return st
	}
	st := p.newState()
	p.all = append(p.all, st)
	return st
}

func (p *statePool) release(st *clientState) {
	p.mu.Lock()
	p.free = append(p.free, st)
	p.mu.Unlock()
	if p.sem != nil {
		<-p.sem
	}
}
