package k8stest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Fleet creates many pods at once, as a kubelet fleet would make them Ready: each pod is
// created, then its status written through the status subresource (Running, Ready, an IP),
// by a bounded pool of goroutines over a client whose rate limit is lifted.
type Fleet struct {
	// Client has no client-side rate limit; the API server's inflight limits bound it.
	Client *kubernetes.Clientset
	// Concurrency is the number of requests in flight. Default 32.
	Concurrency int
}

// NewFleet returns a Fleet over a copy of s's admin config without a client-side rate limit.
func (s *Server) NewFleet() (*Fleet, error) {
	c := rest.CopyConfig(s.Config)
	c.QPS, c.Burst = -1, 0 // a negative QPS turns client-go's rate limiter off
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &Fleet{Client: client, Concurrency: 32}, nil
}

// ReadyPods creates the pods and makes pod i Running and Ready at ip(i). It returns when
// the last status write was sent: the pods are not kept, so that a caller measuring its own
// memory does not count them.
func (f *Fleet) ReadyPods(ctx context.Context, pods []PodSpec, ip func(i int) string) (time.Time, error) {
	var (
		mu   sync.Mutex
		last time.Time
		errs []error
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(f.Concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sent := time.Now()
				p, err := createPod(ctx, f.Client, pods[i])
				if err == nil {
					sent = time.Now()
					_, err = WriteStatus(ctx, f.Client, p, ip(i), true, true)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("pod %s: %w", pods[i].Name, err))
				} else if sent.After(last) {
					last = sent
				}
				mu.Unlock()
			}
		}()
	}
	for i := range pods {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return time.Time{}, fmt.Errorf("%d pod(s) failed, the first: %w", len(errs), errs[0])
	}
	return last, ctx.Err()
}

// MaxLoopbackPods is how many pods LoopbackIP can place at distinct loopback addresses.
const MaxLoopbackPods = 254 * 256

// ScalePods is the pod count of a scale benchmark: SMG_SCALE_PODS when set (1 to
// MaxLoopbackPods), else 10,000.
func ScalePods(tb testing.TB) int {
	tb.Helper()
	v := os.Getenv("SMG_SCALE_PODS")
	if v == "" {
		return 10_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxLoopbackPods {
		tb.Fatalf("SMG_SCALE_PODS=%q: give a pod count from 1 to %d", v, MaxLoopbackPods)
	}
	return n
}

// LoopbackIP is pod i's address in a large fleet: 127.1.0.1 onwards, one loopback address
// per pod, so that every pod is its own worker while one mock engine listening on all
// addresses (0.0.0.0) answers them all.
func LoopbackIP(i int) string {
	return "127." + strconv.Itoa(1+i/(254*256)) + "." + strconv.Itoa(i/254%256) + "." + strconv.Itoa(i%254+1)
}
