package k8s_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/discovery/k8s/k8stest"
	"github.com/smg-go/smg/internal/testutil"
)

// TestScaleThousandPods creates 1,000 Ready pods × 1 port through the API, each pointing at
// its own mock engine, and reports the time from the last pod turning Ready to all 1,000
// workers routable, and the reconcile pass durations. Slow (a few minutes on 2 shared cores):
// it is a benchmark, run on demand (go test -run '^$' -bench ScaleThousandPods -benchtime 1x
// ./discovery/k8s/), not part of go test. The figures are printed, not asserted.
func BenchmarkScaleThousandPods(t *testing.B) {
	const n = 1000
	ns := namespace(t)
	ports := engines(t, n)
	set := metrics.NewSet()
	cfg := testConfig(ns, "app=scale")
	cfg.Metrics = set
	cfg.Debounce = discovery.DefaultDebounce // the spec's 1 s coalescing, not the tests' short one
	g := startGateway(t, cfg, nil)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				_, err := api.ReadyPod(ctx, k8stest.PodSpec{Namespace: ns, Name: "w-" + strconv.Itoa(i), Labels: map[string]string{"app": "scale"},
					Annotations: map[string]string{discovery.AnnotationWorkerPorts: strconv.Itoa(ports[i])}}, "127.0.0.1")
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	start := time.Now()
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	lastReady := time.Now()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testutil.Eventually(t, "1,000 routable workers", func() bool {
		s := g.reg.Current()
		if len(s.Workers) != n {
			return false
		}
		for _, w := range s.Workers {
			if !w.Routable() {
				return false
			}
		}
		return true
	})
	allRoutable := time.Now()
	steady := time.Now()
	plan := g.disc.Reconciler.Pass(ctx)
	steadyPass := time.Since(steady)
	if len(plan.Add)+len(plan.Remove) != 0 {
		t.Fatalf("steady pass submitted %+v", plan)
	}
	var buf bytes.Buffer
	set.WritePrometheus(&buf)
	var sum, count string
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, `smg_discovery_sync_duration_seconds_sum{source="kubernetes"} `); ok {
			sum = v
		}
		if v, ok := strings.CutPrefix(line, `smg_discovery_sync_duration_seconds_count{source="kubernetes"} `); ok {
			count = v
		}
	}
	report := fmt.Sprintf("scale: %d pods created and Ready through the API in %v; last pod Ready → all %d workers routable: %v; "+
		"passes that submitted jobs: %s taking %s s in total; steady-state pass over %d pods: %v; registrations %d",
		n, lastReady.Sub(start).Round(time.Millisecond), n, allRoutable.Sub(lastReady).Round(time.Millisecond), count, sum, n,
		steadyPass.Round(time.Microsecond), len(g.reg.Current().Workers))
	t.Log(report)
	fmt.Println(report)

	// A gateway (re)started beside the 1,000 Ready pods: one burst of 1,000 registrations.
	restartSet := metrics.NewSet()
	cfg.Metrics = restartSet
	begin := time.Now()
	second := startGateway(t, cfg, nil)
	testutil.Eventually(t, "1,000 routable workers after a restart", func() bool {
		s := second.reg.Current()
		if len(s.Workers) != n {
			return false
		}
		for _, w := range s.Workers {
			if !w.Routable() {
				return false
			}
		}
		return true
	})
	buf.Reset()
	restartSet.WritePrometheus(&buf)
	var firstPass string
	for _, line := range strings.Split(buf.String(), "\n") {
		if v, ok := strings.CutPrefix(line, `smg_discovery_sync_duration_seconds_sum{source="kubernetes"} `); ok {
			firstPass = v
		}
	}
	report = fmt.Sprintf("scale: restarted gateway: start → all %d workers routable: %v; its pass submitting %d jobs took %s s",
		n, time.Since(begin).Round(time.Millisecond), n, firstPass)
	t.Log(report)
	fmt.Println(report)
}
