package mockworker

import "time"

// tokenSource tells a transport when an answer's tokens exist: on a schedule (instant mode)
// or as the engine model produces them.
type tokenSource interface {
	// await returns once more than have tokens exist (or all of them do). ok is false when
	// done or gone closed first.
	await(have int, done, gone <-chan struct{}) (avail int, ok bool)
	// cached is the prompt tokens found in the prefix cache (known once the first token is).
	cached() int
	// abandon withdraws an unfinished answer whose client went away.
	abandon()
}

// pacedSource is instant mode's schedule: token i (from 1) exists at
// start + first + (i-1)×gap; with first and gap 0, every token exists at once.
type pacedSource struct {
	start      time.Time
	first, gap time.Duration
	total      int
}

func (p *pacedSource) await(have int, done, gone <-chan struct{}) (int, bool) {
	if have >= p.total || (p.first <= 0 && p.gap <= 0) {
		return p.total, true
	}
	// Absolute deadlines: a late wake-up does not push the later tokens back.
	deadline := p.start.Add(p.first + time.Duration(have)*p.gap)
	if !sleepUntilOr(done, gone, deadline) {
		return have, false
	}
	return have + 1, true
}

func (p *pacedSource) cached() int { return 0 }
func (p *pacedSource) abandon()    {}

// engineSource follows a sequence through the engine model.
type engineSource struct {
	d *engineDriver
	s *seq
}

func (e *engineSource) await(have int, done, gone <-chan struct{}) (int, bool) {
	for {
		g, _, finished := e.s.sink.read()
		if g > have || finished {
			return g, true
		}
		select {
		case <-e.s.sink.wake:
		case <-done:
			return g, false
		case <-gone:
			return g, false
		}
	}
}

func (e *engineSource) cached() int {
	_, c, _ := e.s.sink.read()
	return c
}

func (e *engineSource) abandon() { e.d.cancel(e.s) }

// startSource begins producing r's tokens now: it submits r's sequence to the engine, or
// starts instant mode's schedule, stretched by the worker's latency multipliers.
func (w *Worker) startSource(r *reply) tokenSource {
	if r.seq != nil {
		// fits was checked when the request was parsed, so submit cannot fail.
		_ = w.engine.submit(r.seq)
		src := &engineSource{d: w.engine, s: r.seq}
		if r.pd != nil && !r.pd.decode {
			return &publishingSource{tokenSource: src, w: w, pd: r.pd}
		}
		return src
	}
	admin := w.admin.Load()
	interval := w.cfg.TokenInterval
	if !r.stream {
		// TokenInterval paces streams only: a non-streamed answer that waited for something
		// else (a decode's KV, a delay) comes whole at once, as it does when nothing waits.
		interval = 0
	}
	return &pacedSource{
		start: time.Now(),
		first: time.Duration(float64(interval) * admin.prefillMultiplier()),
		gap:   time.Duration(float64(interval) * admin.decodeMultiplier()),
		total: r.answer.outputTokens,
	}
}

// sleepUntilOr waits for the deadline; false means done or gone closed first (nil never does).
func sleepUntilOr(done, gone <-chan struct{}, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		select {
		case <-done:
			return false
		case <-gone:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	case <-gone:
		return false
	}
}
