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
// maxInFlight in flight (0: no cap). Arrival times are absolute offsets from runStart: a
// dispatcher that fell behind (timer granularity, a full cap) catches up in a burst, keeping
// the average rate.
//
// Requests are handed to long-lived sender goroutines over an unbuffered channel; a sender
// is added only when none is idle. Compared with a goroutine per request this saves the
// goroutine start and, above all, regrowing its stack through fasthttp's deep call chain on
// every request. It returns the senders' states and, per request, how late it started
// against its scheduled arrival (ms).
func (d *driver) openLoop(ctx context.Context, newState func() *clientState, maxInFlight int, b *budget, rate float64, arrival ArrivalKind, seed int64) (states []*clientState, lags []float64) {
	gaps := rand.New(rand.NewPCG(uint64(seed), streamArrival))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	jobs := make(chan *item)
	var wg sync.WaitGroup
	defer func() {
		close(jobs)
		wg.Wait()
	}()
	// hand gives it to an idle sender, else to a new one, else (at the cap) to the first
	// sender that finishes; false when ctx ended first.
	hand := func(it *item) bool {
		select {
		case jobs <- it:
			return true
		default:
		}
		if maxInFlight == 0 || len(states) < maxInFlight {
			st := newState()
			states = append(states, st)
			wg.Go(func() {
				d.send(st, it)
				for next := range jobs {
					d.send(st, next)
				}
			})
			return true
		}
		select {
		case jobs <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var at time.Duration
	for ctx.Err() == nil {
		if wait := at - time.Since(d.runStart); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return states, lags
			}
		}
		if !b.take() {
			return states, lags
		}
		it, err := d.src.next(ctx)
		if err != nil || !hand(it) {
			return states, lags
		}
		lags = append(lags, ms(time.Since(d.runStart)-at))
		at += nextGap(gaps, rate, arrival)
	}
	return states, lags
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
