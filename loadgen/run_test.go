package loadgen

import (
	"context"
	"testing"

	"github.com/smg-go/smg/loadgen/loadgentest"
)

func startServer(t *testing.T, opts loadgentest.Options) *loadgentest.Server {
	t.Helper()
	s, err := loadgentest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close fake server: %v", err)
		}
	})
	return s
}

func smallRandom(base string) Config {
	c := DefaultConfig()
	c.BaseURL, c.Model = base, "m"
	c.Random = RandomConfig{InputLen: 40, OutputLen: 6, RangeRatio: 0.5}
	c.NumRequests = 30
	c.MaxConcurrency = 3
	return c
}

func TestRunClosedLoopStreamingChat(t *testing.T) {
	srv := startServer(t, loadgentest.Options{WorkerID: "w1"})
	cfg := smallRandom(srv.BaseURL)
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 30 || res.Failed != 0 || srv.Requests() != 30 {
		t.Fatalf("completed %d failed %d served %d, want 30 0 30; status %v", res.Completed, res.Failed, srv.Requests(), res.StatusCounts)
	}
	if res.StatusCounts["200"] != 30 || res.Workers["w1"] != 30 {
		t.Errorf("status %v workers %v", res.StatusCounts, res.Workers)
	}
	if res.TTFT.Count != 30 || res.E2E.Count != 30 || res.TPOT.Count == 0 {
		t.Errorf("ttft %d e2e %d tpot %d samples", res.TTFT.Count, res.E2E.Count, res.TPOT.Count)
	}
	if want := res.TotalOutputTokens - 30; int64(res.ITL.Count) != want {
		t.Errorf("itl samples %d, want output tokens - requests = %d", res.ITL.Count, want)
	}
	if res.UsageReported != 30 {
		t.Errorf("usage reported by %d requests, want 30", res.UsageReported)
	}
}
