package mockworker

import (
	"sync"
	"time"
)

// tokenSink is where the engine driver publishes a sequence's progress and where the
// transport writing the answer waits for it.
type tokenSink struct {
	mu        sync.Mutex
	generated int
	cached    int
	finished  bool
	wake      chan struct{} // capacity 1: "something changed"
}

func newTokenSink() *tokenSink { return &tokenSink{wake: make(chan struct{}, 1)} }

func (k *tokenSink) publish(generated, cached int, finished bool) {
	k.mu.Lock()
	k.generated, k.cached, k.finished = generated, cached, finished
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *tokenSink) read() (generated, cached int, finished bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.generated, k.cached, k.finished
}

// engineDriver runs one worker's engine model in real time: one goroutine computes a step,
// sleeps until the step's end and publishes its tokens. Model time runs timeScale times
// faster than the wall clock. Steps follow one another on absolute deadlines (a step starts
// when the previous one ended in model time, however late the goroutine woke), so the pacing
// does not drift.
type engineDriver struct {
	w     *Worker
	scale float64
	epoch time.Time
	done  <-chan struct{}
	wake  chan struct{} // capacity 1: a sequence was submitted
	log   *requestLog   // Config.RequestLog; nil: none

	mu  sync.Mutex // guards eng
	eng *engine
}

func newEngineDriver(w *Worker, p engineParams, scale float64, done <-chan struct{}) *engineDriver {
	d := &engineDriver{w: w, eng: newEngine(p), scale: scale, epoch: time.Now(), done: done, wake: make(chan struct{}, 1)}
	d.eng.kv.record = w.kvpub != nil
	return d
}

// now is the current model time.
func (d *engineDriver) now() time.Duration {
	return time.Duration(float64(time.Since(d.epoch)) * d.scale)
}

// wall is the wall-clock time of model time t.
func (d *engineDriver) wall(t time.Duration) time.Time {
	return d.epoch.Add(time.Duration(float64(t) / d.scale))
}

// submit queues s; it fails when s can never fit in the KV cache.
func (d *engineDriver) submit(s *seq) error {
	d.mu.Lock()
	now := d.now()
	if d.log != nil {
		s.atArrival = d.eng.arrivalState(now)
	}
	err := d.eng.submit(s, now)
	d.mu.Unlock()
	if err == nil {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return err
}

// cancel withdraws s (the client went away); a finished sequence is left alone.
func (d *engineDriver) cancel(s *seq) {
	d.mu.Lock()
	d.eng.cancel(s)
	d.mu.Unlock()
}

// load is the engine's current report.
func (d *engineDriver) load() loadReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.eng.load(d.now(), d.eng.p.maxRunning)
}

// counters returns the prefix cache's cumulative hits and queries in tokens.
func (d *engineDriver) counters() (hits, queries uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.eng.cachedTokens, d.eng.promptTokens
}

func (d *engineDriver) run() {
	var pending []emission
	var events []kvEvent
	for {
		admin := d.w.admin.Load()
		d.mu.Lock()
		end, out, ok := d.eng.step(d.now(), admin.prefillMultiplier(), admin.decodeMultiplier())
		pending = append(pending[:0], out...)
		events = d.takeEvents(events[:0])
		d.mu.Unlock()
		if !ok {
			if d.w.kvpub != nil { // a flush's events, published by this goroutine to keep order
				d.w.kvpub.publish(events)
				clear(events)
			}
			select {
			case <-d.wake:
				continue
			case <-d.done:
				return
			}
		}
		if !sleepUntil(d.done, d.wall(end)) {
			return
		}
		// The step's blocks are in the cache once it ends: publish them with its tokens.
		if d.w.kvpub != nil {
			d.w.kvpub.publish(events)
			clear(events)
		}
		for i := range pending {
			em := &pending[i]
			if em.ttft > 0 {
				d.w.metrics.observeTTFT(em.ttft.Seconds() / d.scale)
			} else if em.itl > 0 {
				d.w.metrics.observeITL(em.itl.Seconds() / d.scale)
			}
			if em.sink != nil {
				em.sink.publish(em.generated, em.cached, em.finished)
			}
			if em.finished && d.log != nil {
				d.log.request(d.w.index, d.epoch, d.scale, em.s)
			}
			em.s, em.sink = nil, nil
		}
	}
}

// fits reports whether s could ever be admitted (its prompt and output fit in the KV cache).
func (d *engineDriver) fits(s *seq) bool {
	return d.eng.blocksFor(s) <= d.eng.kv.total // immutable parameters: no lock needed
}

// flush empties the prefix cache (SGLang's flush_cache) when no sequence is queued or
// running, and reports whether it did: a running sequence's blocks cannot be dropped.
func (d *engineDriver) flush() bool {
	return d.clearCache(false)
}

// loseCache evicts every cached block no sequence holds, even while sequences run: the
// prefix cache a restarted engine comes back without. The running sequences' blocks return to
// the cache when they finish (a real restart would have lost them too; a mock keeps its
// clients' streams).
func (d *engineDriver) loseCache() {
	d.clearCache(true)
}

// clearCache evicts the cached blocks and publishes one AllBlocksCleared; without running,
// only when no sequence is queued or running.
func (d *engineDriver) clearCache(running bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !running && len(d.eng.running)+len(d.eng.waiting) > 0 {
		return false
	}
	d.eng.kv.clearCached()
	if d.eng.kv.record {
		select { // the engine goroutine publishes the flush, in order with its steps
		case d.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// takeEvents moves the cache's recorded changes to dst; d.mu is held.
func (d *engineDriver) takeEvents(dst []kvEvent) []kvEvent {
	kv := d.eng.kv
	dst = append(dst, kv.events...)
	clear(kv.events)
	kv.events = kv.events[:0]
	return dst
}
