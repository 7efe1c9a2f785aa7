package discovery

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/smg-go/smg/worker"
)

// BenchmarkPassInStep is a full pass over 10,000 Ready pods whose workers are all
// registered (the pass every event still causes, one Debounce later), and an address pass
// for one pod's change beside them: the full pass grows with the fleet, the address pass
// must not.
func BenchmarkPassInStep(b *testing.B) {
	const n = 10_000
	rc := worker.DefaultConfig().WithLogger(slog.New(slog.DiscardHandler))
	rc.MaxWorkers = n
	reg, err := worker.NewRegistry(rc)
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	cfg := DefaultConfig()
	cfg.Enabled, cfg.Selector, cfg.Port = true, []string{"app=sglang"}, 8000
	cfg.JobQueueCapacity = n
	cfg.Logger = slog.New(slog.DiscardHandler)
	pods := make([]Pod, n)
	byIP := map[string][]Pod{}
	for i := range pods {
		pods[i] = readyPod("p-"+strconv.Itoa(i), "10.1."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250+1), app, nil)
		byIP[pods[i].IP] = append(byIP[pods[i].IP], pods[i])
	}
	rec, err := NewReconciler(cfg, reg, func() []Pod { return pods }, func(ip string) []Pod { return byIP[ip] })
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	rec.probe = func(_ context.Context, url string) (string, error) { return url, nil }
	rec.models = func(context.Context, string) ([]string, error) { return []string{"llama"}, nil }
	rec.Pass(context.Background())
	for rec.queue.Len() > 0 || reg.Current().ReadyCount() < n {
		time.Sleep(time.Millisecond)
	}
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if p := rec.Pass(context.Background()); len(p.Add)+len(p.Remove) > 0 {
				b.Fatalf("a pass in step submitted %d jobs", len(p.Add)+len(p.Remove))
			}
		}
	})
	b.Run("address", func(b *testing.B) {
		for b.Loop() {
			rec.Changed(pods[4242].IP)
			rec.passChanged(context.Background())
		}
	})
}
