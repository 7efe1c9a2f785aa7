package workertest

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// adders is how many goroutines Fleet registers from.
const adders = 32

// Fleet returns a real registry (closed when tb ends) holding n Ready workers with URLs
// scheme://127.0.x.y:port, all distinct; nothing listens there. The workers' order and
// indexes depend on the goroutines' interleaving; their indexes are 0..n-1.
func Fleet(tb testing.TB, n int, scheme string) *worker.Registry {
	tb.Helper()
	cfg := worker.DefaultConfig().WithLogger(testutil.Quiet)
	cfg.MaxWorkers, cfg.QueueSize = max(n, worker.DefaultMaxWorkers), 4*adders
	reg, err := worker.NewRegistry(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(reg.Close)
	var wg sync.WaitGroup
	errs := make(chan error, adders)
	for a := range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := a; i < n; i += adders {
				spec := worker.Spec{URL: fmt.Sprintf("%s://127.0.%d.%d:%d", scheme, 1+i/250/250%250, 1+i/250%250, 10000+i%250)}
				if err := spec.Normalize(); err != nil {
					errs <- err
					return
				}
				if _, err := reg.Add(context.Background(), spec, worker.StatusReady); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	if got := len(reg.Current().Workers); got != n {
		tb.Fatalf("registered %d workers, want %d", got, n)
	}
	return reg
}

// ProcessCPU returns the user and system CPU time the process has used: benchmarks of work
// spread over goroutines report its difference per unit, which, unlike wall time, neither
// shrinks with the cores used nor grows with the other processes of a shared machine.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
