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
	limit    int64         // 0: no count limit
	window   time.Duration // 0: no deadline; else the deadline is this long after start
	deadline time.Time     // set by start
	issued   atomic.Int64
}

// start opens the measured window at t: the deadline, if any, counts from there.
func (b *budget) start(t time.Time) {
	if b.window > 0 {
		b.deadline = t.Add(b.window)
	}
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
	want     bool          // src.wantsAnswer()
	runStart time.Time     // the measured window's start
	cpuStart time.Duration // the process's CPU time then
	prog     *progress     // nil: no progress display
}

// job is one request handed to a sender: its item, and the zero of its sample's end, or the
// zero time for a warm-up request, which is sent like the others but not measured.
type job struct {
	it       *item
	runStart time.Time
}

func (j job) measured() bool { return !j.runStart.IsZero() }

// send performs one request on st and tells the source and, when measured, the progress
// display.
func (d *driver) send(st *clientState, j job) {
	s := d.cl.do(st, j.it, j.runStart, d.want, j.measured())
	d.src.done(j.it, outcome{ok: s.fail == failNone, answer: st.answer, outputTokens: s.outputTokens})
	if d.prog != nil && j.measured() {
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
				d.send(st, job{it, d.runStart})
			}
		})
	}
	wg.Wait()
}

// openLoop starts requests on a fixed schedule of arrival times, independent of how fast
// answers come (so a slow server builds a queue instead of slowing the load), with at most
// maxInFlight in flight (0: no cap). Arrival times are absolute offsets from the loop's
// start: a dispatcher that fell behind (timer granularity, a full cap) catches up in a
// burst, keeping the average rate.
//
// The first warmup arrivals are the warm-up: sent on the same schedule and not measured, so
// the measured window (b's, from the first measured arrival's time: d.runStart) opens on
// the steady state of the offered rate. A warm-up sent any other way measures something
// else: a closed loop at the client cap overloads the server and, draining before the
// measured arrivals, leaves it idle; both leave their traces in the first seconds measured
// (docs/benchmarks-history.md).
//
// Requests are handed to long-lived sender goroutines over an unbuffered channel; a sender
// is added only when none is idle. Compared with a goroutine per request this saves the
// goroutine start and, above all, regrowing its stack through fasthttp's deep call chain on
// every request. It returns the senders' states and, per measured request, how late it
// started against its scheduled arrival (ms).
func (d *driver) openLoop(ctx context.Context, newState func() *clientState, maxInFlight int, b *budget, rate float64, arrival ArrivalKind, seed int64, warmup int) (states []*clientState, lags []float64) {
	gaps := rand.New(rand.NewPCG(uint64(seed), streamArrival))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	pool := &senders{d: d, newState: newState, max: maxInFlight, jobs: make(chan job)}
	defer pool.close()
	// The measured window's deadline also ends waits for a ready conversation or a free slot.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	zero := time.Now()
	var at time.Duration
	for n := 0; ctx.Err() == nil; n++ {
		measured := n >= warmup
		if n == warmup { // the measured window opens at this arrival's time
			d.runStart = zero.Add(at)
			d.cpuStart = processCPU()
			b.start(d.runStart)
			if !b.deadline.IsZero() {
				deadline = time.AfterFunc(time.Until(b.deadline), cancel)
			}
		}
		if wait := at - time.Since(zero); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return pool.states, lags
			}
		}
		if measured && !b.take() {
			break
		}
		it, err := d.src.next(ctx)
		if err != nil {
			break
		}
		j := job{it: it}
		if measured {
			j.runStart = d.runStart
		}
		if !pool.hand(ctx, j) {
			break
		}
		if measured {
			lags = append(lags, ms(time.Since(zero)-at))
		}
		at += nextGap(gaps, rate, arrival)
	}
	return pool.states, lags
}

// senders is the open loop's pool of sender goroutines, grown on demand up to max (0: no
// cap); each sender keeps its clientState for every job it sends.
type senders struct {
	d        *driver
	newState func() *clientState
	max      int
	jobs     chan job
	wg       sync.WaitGroup
	states   []*clientState
}

// hand gives j to an idle sender, else to a new one, else (at the cap) to the first sender
// that finishes; false when ctx ended first.
func (p *senders) hand(ctx context.Context, j job) bool {
	select {
	case p.jobs <- j:
		return true
	default:
	}
	if p.max == 0 || len(p.states) < p.max {
		st := p.newState()
		p.states = append(p.states, st)
		p.wg.Go(func() {
			p.d.send(st, j)
			for next := range p.jobs {
				p.d.send(st, next)
			}
		})
		return true
	}
	select {
	case p.jobs <- j:
		return true
	case <-ctx.Done():
		return false
	}
}

// close waits for the senders to finish the jobs they hold.
func (p *senders) close() {
	close(p.jobs)
	p.wg.Wait()
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
