package discovery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestJobQueueDedupAndRetry(t *testing.T) {
	done := make(chan error, 10)
	q, err := NewJobQueue(4, 2, func(_ string, err error) { done <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	release := make(chan struct{})
	var runs atomic.Int32
	job := func(ctx context.Context) error { runs.Add(1); <-release; return errors.New("engine down") }
	ctx := context.Background()
	if ok, err := q.Submit(ctx, "a", job); !ok || err != nil {
		t.Fatalf("first submit: %v %v", ok, err)
	}
	if ok, _ := q.Submit(ctx, "a", job); ok {
		t.Fatal("a second job for a busy key was queued")
	}
	if !q.Busy("a") || q.Len() != 1 {
		t.Fatalf("busy %v len %d", q.Busy("a"), q.Len())
	}
	close(release)
	if err := <-done; err == nil {
		t.Fatal("job error not reported")
	}
	if q.Busy("a") {
		t.Fatal("a failed job still blocks its key")
	}
	if ok, err := q.Submit(ctx, "a", job); !ok || err != nil {
		t.Fatalf("retry after failure: %v %v", ok, err)
	}
	<-done
	if runs.Load() != 2 {
		t.Fatalf("runs %d, want 2", runs.Load())
	}
}

func TestJobQueueConcurrencyLimitAndFullQueueBlocks(t *testing.T) {
	const capacity, concurrency = 3, 2
	q, err := NewJobQueue(capacity, concurrency, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var running, peak atomic.Int32
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	job := func(ctx context.Context) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return nil
	}
	keys := []string{"a", "b", "c", "d", "e"} // 2 running + 3 pending fill the queue
	for _, k := range keys {
		if ok, err := q.Submit(context.Background(), k, job); !ok || err != nil {
			t.Fatalf("submit %s: %v %v", k, ok, err)
		}
	}
	<-started
	<-started
	// The queue is full: a submit waits until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var blockedErr error
	go func() { defer wg.Done(); _, blockedErr = q.Submit(ctx, "f", job) }()
	cancel()
	wg.Wait()
	if !errors.Is(blockedErr, context.Canceled) {
		t.Fatalf("submit to a full queue returned %v, want context.Canceled", blockedErr)
	}
	if q.Busy("f") {
		t.Fatal("a refused job keeps its key busy")
	}
	close(release)
	for range 3 {
		<-started
	}
	if p := peak.Load(); p > concurrency {
		t.Fatalf("%d jobs ran at once, limit %d", p, concurrency)
	}
}

func TestJobQueueClose(t *testing.T) {
	q, _ := NewJobQueue(1, 1, nil)
	started := make(chan struct{})
	_, _ = q.Submit(context.Background(), "a", func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() })
	<-started
	q.Close()
	if _, err := q.Submit(context.Background(), "b", func(context.Context) error { return nil }); !errors.Is(err, ErrQueueClosed) {
		t.Fatalf("submit after close: %v", err)
	}
	if _, err := NewJobQueue(-1, 1, nil); err == nil {
		t.Fatal("negative capacity accepted")
	}
	if _, err := NewJobQueue(0, 1, nil); err == nil {
		t.Fatal("zero capacity accepted (zero is not the default)")
	}
	if _, err := NewJobQueue(1, 0, nil); err == nil {
		t.Fatal("zero concurrency accepted (zero is not the default)")
	}
}
