package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/loadgen/loadgentest"
	"github.com/valyala/fasthttp"
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

// testConfig is DefaultConfig with a timeout that fails a stuck request long before the
// test binary's own timeout.
func testConfig() Config {
	c := DefaultConfig()
	c.Timeout = 30 * time.Second
	return c
}

func smallRandom(base string) Config {
	c := testConfig()
	c.BaseURL, c.Model = base, "m"
	c.Random = RandomConfig{InputLen: 40, OutputLen: 6, Distribution: LengthUniform, RangeRatio: 0.5}
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
	if res.ArrivalLag.Count != 0 {
		t.Errorf("closed loop reports arrival lag %+v", res.ArrivalLag)
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
	if res.ClientCPUS <= 0 || res.ClientCPUPerRequestUS <= 0 {
		t.Errorf("client CPU %v s, %v µs/request: not measured", res.ClientCPUS, res.ClientCPUPerRequestUS)
	}
}

func runOK(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed+res.Failed == 0 {
		t.Fatal("no request finished")
	}
	return res
}

// sumMaxTokens is the output the fake server generates for cfg's static workload: it
// always answers exactly max_tokens.
func sumMaxTokens(t *testing.T, cfg Config, n int) (out, in int64) {
	t.Helper()
	cfg.derive()
	src, err := newSource(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	items := src.(*staticSource).items
	for i := range n {
		out += int64(items[i%len(items)].maxTokens)
		in += int64(items[i%len(items)].promptTokens)
	}
	return out, in
}

func TestRunEndpointsAndStreaming(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	for _, ep := range []Endpoint{EndpointChat, EndpointCompletions, EndpointGenerate} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", ep, stream), func(t *testing.T) {
				cfg := smallRandom(srv.BaseURL)
				cfg.Endpoint, cfg.Stream, cfg.NumRequests = ep, stream, 12
				res := runOK(t, cfg)
				wantOut, wantIn := sumMaxTokens(t, cfg, 12)
				if res.Completed != 12 || res.TotalOutputTokens != wantOut || res.TotalInputTokens != wantIn || res.UsageReported != 12 {
					t.Fatalf("completed %d, tokens out %d in %d (want %d %d), usage %d; status %v",
						res.Completed, res.TotalOutputTokens, res.TotalInputTokens, wantOut, wantIn, res.UsageReported, res.StatusCounts)
				}
				if stream {
					if int64(res.ITL.Count) != wantOut-12 || res.TTFT.Count != 12 || res.TPOT.Count == 0 {
						t.Fatalf("stream samples: itl %d (want %d) ttft %d tpot %d", res.ITL.Count, wantOut-12, res.TTFT.Count, res.TPOT.Count)
					}
				} else if res.ITL.Count != 0 || res.TPOT.Count != 0 || res.TTFT != res.E2E {
					t.Fatalf("non-streamed run has itl %d tpot %d, ttft %+v != e2e %+v", res.ITL.Count, res.TPOT.Count, res.TTFT, res.E2E)
				}
			})
		}
	}
}

func TestRunCountsFailuresByStatus(t *testing.T) {
	srv := startServer(t, loadgentest.Options{FailEvery: 4, WorkerID: "w"})
	cfg := smallRandom(srv.BaseURL)
	cfg.MaxConcurrency, cfg.NumRequests = 1, 20
	res := runOK(t, cfg)
	if res.Completed != 15 || res.Failed != 5 || res.StatusCounts["200"] != 15 || res.StatusCounts["503"] != 5 || res.Workers["w"] != 20 {
		t.Fatalf("completed %d failed %d status %v workers %v", res.Completed, res.Failed, res.StatusCounts, res.Workers)
	}
	if res.E2E.Count != 15 {
		t.Fatalf("latency samples %d: failed requests must not count", res.E2E.Count)
	}
	if ex := res.ErrorExamples["503"]; !strings.Contains(ex, "injected failure") || len(res.ErrorExamples) != 1 {
		t.Fatalf("error examples %q", res.ErrorExamples)
	}
}

func TestRunFallsBackWithoutUsage(t *testing.T) {
	srv := startServer(t, loadgentest.Options{OmitUsage: true})
	for _, ep := range []Endpoint{EndpointChat, EndpointGenerate} {
		cfg := smallRandom(srv.BaseURL)
		cfg.Endpoint, cfg.NumRequests = ep, 10
		res := runOK(t, cfg)
		wantOut, wantIn := sumMaxTokens(t, cfg, 10)
		if res.UsageReported != 0 || res.TotalOutputTokens != wantOut || res.TotalInputTokens != wantIn || res.CacheHitRate != 0 {
			t.Fatalf("%s: usage %d, out %d (want %d content events), in %d (want %d words)", ep, res.UsageReported, res.TotalOutputTokens, wantOut, res.TotalInputTokens, wantIn)
		}
	}
}

func TestRunAcceptsWholeAnswersToStreamRequests(t *testing.T) {
	srv := startServer(t, loadgentest.Options{IgnoreStream: true})
	cfg := smallRandom(srv.BaseURL)
	cfg.NumRequests = 5
	res := runOK(t, cfg)
	wantOut, _ := sumMaxTokens(t, cfg, 5)
	if res.Completed != 5 || res.TotalOutputTokens != wantOut || res.ITL.Count != 0 {
		t.Fatalf("completed %d out %d (want %d) itl %d; %v", res.Completed, res.TotalOutputTokens, wantOut, res.ITL.Count, res.ErrorExamples)
	}
}

func TestRunTruncatedStreamFails(t *testing.T) {
	srv := startServer(t, loadgentest.Options{OmitDone: true})
	cfg := smallRandom(srv.BaseURL)
	cfg.NumRequests = 4
	res := runOK(t, cfg)
	if res.Failed != 4 || res.StatusCounts["truncated_stream"] != 4 || !strings.Contains(res.ErrorExamples["truncated_stream"], "[DONE]") {
		t.Fatalf("status %v examples %q", res.StatusCounts, res.ErrorExamples)
	}
}

func TestRunTimeout(t *testing.T) {
	srv := startServer(t, loadgentest.Options{TokenDelay: time.Second})
	cfg := smallRandom(srv.BaseURL)
	cfg.NumRequests, cfg.MaxConcurrency, cfg.Timeout = 1, 1, 50*time.Millisecond
	cfg.Random = RandomConfig{InputLen: 5, OutputLen: 3, Distribution: LengthUniform, RangeRatio: 1}
	res := runOK(t, cfg)
	if res.StatusCounts["timeout"] != 1 {
		t.Fatalf("status %v, want one timeout", res.StatusCounts)
	}
}

func TestRunConnectionError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := smallRandom("http://" + addr + "/v1")
	cfg.NumRequests = 3
	res := runOK(t, cfg)
	if res.StatusCounts["connection_error"] != 3 || res.RequestThroughput != 0 {
		t.Fatalf("status %v throughput %v", res.StatusCounts, res.RequestThroughput)
	}
}

func TestRunOpenLoop(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	for _, arrival := range []ArrivalKind{ArrivalPoisson, ArrivalConstant} {
		for _, maxConc := range []int{0, 2} {
			cfg := smallRandom(srv.BaseURL)
			cfg.RequestRate, cfg.Arrival, cfg.MaxConcurrency, cfg.NumRequests = 5000, arrival, maxConc, 40
			res := runOK(t, cfg)
			if res.Completed != 40 || res.ArrivalLag.Count != 40 || res.ArrivalLag.Min < 0 {
				t.Fatalf("%s cap %d: completed %d, arrival lag %+v, status %v", arrival, maxConc, res.Completed, res.ArrivalLag, res.StatusCounts)
			}
		}
	}
}

func TestRunDurationBoundsTheRun(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	cfg := smallRandom(srv.BaseURL)
	cfg.NumRequests, cfg.Duration, cfg.TimelineInterval = 0, 150*time.Millisecond, 50*time.Millisecond
	res := runOK(t, cfg)
	if res.Failed != 0 || res.Completed == 0 || len(res.Timeline) == 0 {
		t.Fatalf("completed %d failed %d timeline %d", res.Completed, res.Failed, len(res.Timeline))
	}
	var sum int64
	for _, p := range res.Timeline {
		sum += p.Completed
	}
	if sum != res.Completed {
		t.Fatalf("timeline holds %d completions, result %d", sum, res.Completed)
	}
}

func TestRunSharedPrefixCacheHitRate(t *testing.T) {
	srv := startServer(t, loadgentest.Options{CacheBlock: 16})
	cfg := testConfig()
	cfg.BaseURL, cfg.Model, cfg.Workload, cfg.MaxConcurrency = srv.BaseURL, "m", WorkloadSharedPrefix, 1
	cfg.SharedPrefix = SharedPrefixConfig{NumGroups: 2, PromptsPerGroup: 4, SystemPromptLen: 64, QuestionLen: 8, OutputLen: 2}
	res := runOK(t, cfg)
	// Per group, the first prompt misses and the other three hit the 64-word system prompt
	// (four 16-word blocks); a 72-word prompt has no fifth full block.
	if want := 6.0 * 64 / (8 * 72); res.Completed != 8 || res.CacheHitRate != want || res.TotalCachedTokens != 6*64 {
		t.Fatalf("hit rate %v cached %d, want %v", res.CacheHitRate, res.TotalCachedTokens, want)
	}
}

func TestRunMultiTurnSendsAnswersBack(t *testing.T) {
	var mu sync.Mutex
	var bodies []decodedBody
	var sessions []string
	srv := startServer(t, loadgentest.Options{Record: func(req *fasthttp.Request) {
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, decodeBody(t, req.Body()))
		sessions = append(sessions, string(req.Header.Peek("X-Session")))
	}})
	cfg := testConfig()
	// One client takes the ready conversations in FIFO order: u0 u1 u0 u1 u0 u1.
	cfg.BaseURL, cfg.Model, cfg.Workload, cfg.MaxConcurrency = srv.BaseURL, "m", WorkloadMultiTurn, 1
	cfg.MultiTurn = MultiTurnConfig{Users: 2, Rounds: 3, TurnLen: 4, OutputLen: 3}
	cfg.SessionHeader = "X-Session"
	res := runOK(t, cfg)
	if res.Completed != 6 || len(bodies) != 6 {
		t.Fatalf("completed %d, server saw %d", res.Completed, len(bodies))
	}
	answers := 0
	for _, b := range bodies {
		for _, m := range b.Messages {
			if m.Role == "assistant" {
				answers++
				if m.Content != "t0 t1 t2 " {
					t.Fatalf("assistant message %q, want the server's answer", m.Content)
				}
			}
		}
	}
	if answers != 2*(1+2) { // per user: round 2 carries 1 answer, round 3 carries 2
		t.Fatalf("%d assistant messages sent back, want 6", answers)
	}
	if want := []string{"user-0-0", "user-1-0", "user-0-0", "user-1-0", "user-0-0", "user-1-0"}; !slices.Equal(sessions, want) {
		t.Fatalf("session headers %q, want %q", sessions, want)
	}
}

func TestRunWarmupIsNotMeasured(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	cfg := smallRandom(srv.BaseURL)
	cfg.Warmup, cfg.NumRequests = 5, 10
	res := runOK(t, cfg)
	if res.Completed != 10 || srv.Requests() != 15 {
		t.Fatalf("completed %d served %d, want 10 and 15", res.Completed, srv.Requests())
	}
}

// An open loop's warm-up is the first arrivals of its own schedule: the measured arrivals
// follow while the warm-up's requests are still in flight, where a warm-up sent first and
// drained would leave the server idle before them (and, sent as a closed loop at the client
// cap, overload it first).
func TestOpenLoopWarmupRunsStraightIntoTheMeasuredArrivals(t *testing.T) {
	const warm = 5
	release := make(chan struct{})
	var arrived, held atomic.Int64
	var overlapped atomic.Bool
	srv := startServer(t, loadgentest.Options{Record: func(*fasthttp.Request) {
		switch n := arrived.Add(1); {
		case n <= warm: // hold the warm-up until a measured request arrives
			held.Add(1)
			select {
			case <-release:
			case <-time.After(5 * time.Second): // a warm-up that must drain first never is released
			}
			held.Add(-1)
		case n == warm+1:
			overlapped.Store(held.Load() > 0)
			close(release)
		}
	}})
	cfg := smallRandom(srv.BaseURL)
	cfg.RequestRate, cfg.Arrival, cfg.MaxConcurrency = 1000, ArrivalConstant, 16
	cfg.Warmup, cfg.NumRequests = warm, 10
	res := runOK(t, cfg)
	if !overlapped.Load() {
		t.Fatal("the first measured request arrived after the warm-up had drained")
	}
	if res.Completed != 10 || srv.Requests() != warm+10 || len(res.Timeline) == 0 {
		t.Fatalf("completed %d, served %d, want 10 measured of %d", res.Completed, srv.Requests(), warm+10)
	}
}

func TestRunTLSAndAPIKey(t *testing.T) {
	var auth atomic.Value
	var extra atomic.Value
	srv := startServer(t, loadgentest.Options{TLS: true, Record: func(req *fasthttp.Request) {
		auth.Store(string(req.Header.Peek(fasthttp.HeaderAuthorization)))
		extra.Store(string(req.Header.Peek("X-SMG-Target-Worker")))
	}})
	cfg := smallRandom(srv.BaseURL)
	cfg.NumRequests, cfg.APIKey = 2, "sk-test"
	cfg.Headers = map[string]string{"X-SMG-Target-Worker": "w7"}
	res := runOK(t, cfg)
	if res.StatusCounts["connection_error"] != 2 {
		t.Fatalf("self-signed certificate accepted without Insecure: %v", res.StatusCounts)
	}
	cfg.Insecure = true
	res = runOK(t, cfg)
	if res.Completed != 2 || auth.Load() != "Bearer sk-test" || extra.Load() != "w7" {
		t.Fatalf("status %v, authorization %v, extra header %v", res.StatusCounts, auth.Load(), extra.Load())
	}
}

func TestRunStopsOnCancelledContext(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, smallRandom(srv.BaseURL)); err == nil {
		t.Fatal("Run on a cancelled context returned no error")
	}
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Fatal("Run accepted an empty config")
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	srv := startServer(t, loadgentest.Options{WorkerID: "w"})
	res := runOK(t, smallRandom(srv.BaseURL))
	path := filepath.Join(t.TempDir(), "r.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	back, err := ReadResultFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Completed != res.Completed || back.E2E != res.E2E || back.Workers["w"] != res.Workers["w"] || back.Config.Seed != res.Config.Seed || back.Config.Model != "m" {
		t.Fatal("result changed through JSON")
	}
	raw, _ := os.ReadFile(path)
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"request_throughput", "input_throughput", "output_throughput", "ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms", "status_counts", "workers", "cache_hit_rate", "completed", "failed", "duration_s", "timeline", "histograms"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("result JSON lacks %q", k)
		}
	}
	if strings.Contains(string(raw), "sk-") {
		t.Error("API key leaked into the result")
	}
}

func TestRunDrawsProgressAndLeavesNoGoroutines(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	var progress bytes.Buffer
	cfg := smallRandom(srv.BaseURL)
	cfg.Progress = &progress
	cfg.RequestRate, cfg.MaxConcurrency = 2000, 0
	runOK(t, cfg)
	if out := progress.String(); !strings.Contains(out, "100% 30/30 req") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("progress output %q", out)
	}
	// The fake server's goroutines stay; none of loadgen's or of its HTTP client's may, except
	// fasthttp's idle-connection cleaner, which sleeps MaxIdleConnDuration (10 s) before it
	// notices that Run closed every connection. Goroutines that end asynchronously get a while.
	owned := []string{"loadgen.(*driver)", "loadgen.(*progress)", "loadgen.(*multiTurnSource)", "fasthttp.(*HostClient)", "fasthttp.(*clientConn"}
	var stacks string
	for range 200 {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		leaked := false
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "connsCleaner") {
				continue
			}
			for _, o := range owned {
				leaked = leaked || strings.Contains(g, o)
			}
		}
		if !leaked {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("goroutines left behind by Run:\n%s", stacks)
}

func TestArrivalGaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, streamArrival))
	var sum time.Duration
	const n = 20000
	for range n {
		sum += nextGap(rng, 1000, ArrivalPoisson)
	}
	// Exponential gaps with mean 1 ms: the sample mean of 20000 has a standard error of
	// 7 µs; the seed is fixed, so this is exact, not flaky.
	if mean := sum / n; mean < 970*time.Microsecond || mean > 1030*time.Microsecond {
		t.Fatalf("mean Poisson gap %v, want 1ms", mean)
	}
	if g := nextGap(rng, 4, ArrivalConstant); g != 250*time.Millisecond {
		t.Fatalf("constant gap %v", g)
	}
}

func TestRunMultiTurnOpenLoopAndDuration(t *testing.T) {
	srv := startServer(t, loadgentest.Options{})
	cfg := testConfig()
	cfg.BaseURL, cfg.Model, cfg.Workload = srv.BaseURL, "m", WorkloadMultiTurn
	cfg.MultiTurn = MultiTurnConfig{Users: 3, Rounds: 2, TurnLen: 4, OutputLen: 2, ThinkTime: time.Millisecond}
	cfg.RequestRate, cfg.NumRequests = 1000, 12
	if res := runOK(t, cfg); res.Completed != 12 {
		t.Fatalf("open loop: completed %d of 12: %v", res.Completed, res.StatusCounts)
	}
	// Closed loop bounded by time: clients waiting for a thinking conversation must stop at
	// the deadline too.
	cfg.RequestRate, cfg.NumRequests, cfg.MaxConcurrency, cfg.Duration = 0, 0, 3, 100*time.Millisecond
	if res := runOK(t, cfg); res.Completed == 0 || res.Failed != 0 {
		t.Fatalf("closed loop with duration: completed %d failed %d", res.Completed, res.Failed)
	}
}
