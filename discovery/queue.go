package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Job queue defaults (--job-queue-capacity, --job-queue-concurrency).
const (
	DefaultJobQueueCapacity    = 1000
	DefaultJobQueueConcurrency = 200
)

// ErrQueueClosed is returned by Submit after Close.
var ErrQueueClosed = errors.New("job queue closed")

// JobQueue is the bounded, concurrency-limited control-plane job queue. Jobs carry a key
// (the worker address): while a job for a key is pending or running, Submit skips further jobs
// for it; once it finishes, successfully or not, the key is free again, so a failed job is
// retried by the next pass that submits it (spec: Informer and Reconcile Loop).
//
// A fixed pool of Concurrency goroutines runs the jobs; Submit blocks while Capacity jobs are
// pending, which is how a reconcile pass waits on a full queue.
type JobQueue struct {
	jobs   chan queuedJob
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	keys   map[string]struct{}
	closed bool
	done   func(key string, err error)
}

type queuedJob struct {
	key string
	run func(context.Context) error
}

// NewJobQueue starts a queue with the given capacity and concurrency, both at least 1 (zero
// is refused, not read as the defaults DefaultJobQueueCapacity and DefaultJobQueueConcurrency).
// onDone, if not nil, runs after every job with its key and error, on the job's goroutine.
func NewJobQueue(capacity, concurrency int, onDone func(key string, err error)) (*JobQueue, error) {
	if capacity < 1 || concurrency < 1 {
		return nil, fmt.Errorf("job queue capacity %d and concurrency %d: give positive numbers (defaults %d and %d)",
			capacity, concurrency, DefaultJobQueueCapacity, DefaultJobQueueConcurrency)
	}
	ctx, cancel := context.WithCancel(context.Background())
	q := &JobQueue{jobs: make(chan queuedJob, capacity), ctx: ctx, cancel: cancel,
		keys: map[string]struct{}{}, done: onDone}
	q.wg.Add(concurrency)
	for range concurrency {
		go q.loop()
	}
	return q, nil
}

func (q *JobQueue) loop() {
	defer q.wg.Done()
	for {
		select {
		case <-q.ctx.Done():
			return
		case j := <-q.jobs:
			err := j.run(q.ctx)
			q.mu.Lock()
			delete(q.keys, j.key)
			q.mu.Unlock()
			if q.done != nil {
				q.done(j.key, err)
			}
		}
	}
}

// Submit queues run under key. It returns false without queueing when a job for key is
// pending or running. It blocks while the queue is full, until ctx ends (ctx.Err()) or the
// queue closes (ErrQueueClosed).
func (q *JobQueue) Submit(ctx context.Context, key string, run func(context.Context) error) (bool, error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false, ErrQueueClosed
	}
	if _, busy := q.keys[key]; busy {
		q.mu.Unlock()
		return false, nil
	}
	q.keys[key] = struct{}{}
	q.mu.Unlock()
	select {
	case q.jobs <- queuedJob{key: key, run: run}:
		return true, nil
	case <-ctx.Done():
		q.release(key)
		return false, ctx.Err()
	case <-q.ctx.Done():
		q.release(key)
		return false, ErrQueueClosed
	}
}

func (q *JobQueue) release(key string) {
	q.mu.Lock()
	delete(q.keys, key)
	q.mu.Unlock()
}

// Busy reports whether a job for key is pending or running.
func (q *JobQueue) Busy(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.keys[key]
	return ok
}

// Len returns the number of keys pending or running.
func (q *JobQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.keys)
}

// Close cancels the jobs' context, waits for running jobs to return and drops pending ones.
func (q *JobQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cancel()
	q.wg.Wait()
}
