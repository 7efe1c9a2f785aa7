package kvevents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/internal/ownedtmp"
	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/kvevents/kvindex"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/policytest"
)

// These tests run the real mockworker command: an engine model that publishes its KV-cache
// events over real ZMQ (and gRPC) sockets on 127.0.0.1, encoded by its own code.

var (
	mockOnce sync.Once
	mockBin  string
	mockErr  error
)

func mockBinary(t *testing.T) string {
	t.Helper()
	mockOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..")
		for _, orphan := range ownedtmp.Orphans("kvevents-mock-") {
			_ = os.RemoveAll(orphan)
		}
		dir, err := ownedtmp.Make("kvevents-mock-")
		if err != nil {
			mockErr = err
			return
		}
		mockBin = filepath.Join(dir, "mockworker")
		cmd := exec.Command("go", "build", "-o", mockBin, "./cmd/mockworker")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			mockErr = fmt.Errorf("go build ./cmd/mockworker: %v\n%s", err, out)
		}
	})
	if mockErr != nil {
		t.Fatal(mockErr)
	}
	return mockBin
}

type mockWorker struct{ url, events, replay string }

var kvLine = regexp.MustCompile(`worker \d+ listening on (\S+) \(.*kv events (tcp://\S+), replay (tcp://\S+)\)`)

// startMock runs `mockworker --mode engine --kv-events-port 0` with args and returns its
// workers once they all printed their listening line.
func startMock(t *testing.T, count int, args ...string) []mockWorker {
	t.Helper()
	all := append([]string{"--host", "127.0.0.1", "--port", "0", "--count", strconv.Itoa(count),
		"--mode", "engine", "--kv-events-port", "0", "--time-scale", "50"}, args...)
	cmd := exec.Command(mockBinary(t), all...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mockworker output:\n%s", out.String())
		}
	})
	var ws []mockWorker
	testutil.Eventually(t, "mock workers listening", func() bool {
		ws = ws[:0]
		for _, m := range kvLine.FindAllStringSubmatch(out.String(), -1) {
			ws = append(ws, mockWorker{url: m[1], events: m[2], replay: m[3]})
		}
		return len(ws) == count
	})
	return ws
}

// generate sends ids to a worker's /generate and returns the prompt tokens the engine found
// in its prefix cache.
func generate(t *testing.T, url string, ids []uint32) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input_ids": ids, "sampling_params": map[string]any{"max_new_tokens": 1}})
	resp, err := http.Post(url+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		MetaInfo struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("/generate: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.MetaInfo.CachedTokens
}

const mockBlock = 16

// prompt returns n blocks of tokens; prompts of one family share their first `shared` blocks.
func mockPrompt(family, variant, shared, n int) []uint32 {
	ids := make([]uint32, 0, n*mockBlock)
	for i := range n * mockBlock {
		if i < shared*mockBlock {
			ids = append(ids, uint32(family*100000+i))
		} else {
			ids = append(ids, uint32(family*100000+variant*1000+i+50000))
		}
	}
	return ids
}

// TestMockEventsPredictTheEnginesHits: a real mockworker engine with a small KV cache serves
// prompts that share prefixes and evict one another; before every request the index, fed by
// the worker's ZMQ events, predicts how many prompt tokens the engine will find cached, and
// the engine's answer reports exactly that. Both encodings.
func TestMockEventsPredictTheEnginesHits(t *testing.T) {
	for _, enc := range []string{"map", "array"} {
		t.Run(enc, func(t *testing.T) {
			// 24 blocks of cache: prompts of 6 blocks (+1 output token) evict one another.
			ws := startMock(t, 2, "--kv-events-encoding", enc, "--kv-tokens", strconv.Itoa(24*mockBlock), "--block-size", strconv.Itoa(mockBlock))
			idx, err := kvindex.New(kvindex.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			var consumers []*ZMQConsumer
			holders := make([]kvindex.Holder, len(ws))
			for i, w := range ws {
				holders[i] = idx.Holder(w.url)
				cfg := DefaultZMQConfig()
				cfg.Endpoint, cfg.ReplayEndpoint = w.events, w.replay
				c, err := StartZMQ(cfg, func(int) Sink { return IndexSink{Index: idx, Holder: holders[i]} })
				if err != nil {
					t.Fatal(err)
				}
				consumers = append(consumers, c)
			}
			defer func() {
				for _, c := range consumers {
					c.Close()
				}
			}()
			depth := make([]uint32, 2)
			r := testutil.NewRand(7)
			for round := range 60 {
				w := r.IntN(2)
				ids := mockPrompt(r.IntN(3), r.IntN(4), 1+r.IntN(4), 6)
				idx.Match(ids, depth)
				want := min(int(depth[w])*mockBlock, len(ids)-1)
				if got := generate(t, ws[w].url, ids); got != want {
					t.Fatalf("round %d worker %d: the engine found %d tokens cached, the index predicted %d", round, w, got, want)
				}
				// The request's blocks are stored once its prefill completes; its evictions
				// were published before them.
				testutil.Eventually(t, "the request's blocks in the index", func() bool {
					idx.Match(ids, depth)
					return depth[w] == 6
				})
			}
			for i, h := range holders {
				if n := idx.Blocks(h); n > 24 {
					t.Fatalf("worker %d: the index holds %d blocks of a 24-block cache", i, n)
				}
			}
			for _, c := range consumers {
				if st := c.Stats(); st.Dropped != 0 || st.Cleared != 0 || st.Applied == 0 {
					t.Fatalf("consumer stats %+v", st)
				}
			}
			if st := idx.Stats(); st.Ignored != 0 {
				t.Fatalf("index stats %+v: events the index could not place", st)
			}

			// flush_cache: the engine reports AllBlocksCleared.
			resp, err := http.Post(ws[0].url+"/flush_cache", "application/json", strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			testutil.Eventually(t, "the flush in the index", func() bool { return idx.Blocks(holders[0]) == 0 })
		})
	}
}

func postAdmin(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url+"/admin/config", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin %s: %s", body, resp.Status)
	}
}

// TestMockEventsSurviveDropsAndRestarts: a batch the engine's PUB socket loses is replayed
// from its ROUTER socket (the index stays exact); a restarted sequence clears the worker.
func TestMockEventsSurviveDropsAndRestarts(t *testing.T) {
	ws := startMock(t, 1, "--kv-events-encoding", "array")
	idx, _ := kvindex.New(kvindex.DefaultConfig())
	h := idx.Holder(ws[0].url)
	cfg := DefaultZMQConfig()
	cfg.Endpoint, cfg.ReplayEndpoint = ws[0].events, ws[0].replay
	c, err := StartZMQ(cfg, func(int) Sink { return IndexSink{Index: idx, Holder: h} })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	depth := make([]uint32, 1)
	held := func(ids []uint32) func() bool {
		return func() bool { idx.Match(ids, depth); return depth[0] == uint32(len(ids)/mockBlock) }
	}
	a, b, d := mockPrompt(1, 0, 0, 4), mockPrompt(2, 0, 0, 4), mockPrompt(3, 0, 0, 4)
	generate(t, ws[0].url, a)
	testutil.Eventually(t, "prompt a in the index", held(a))

	before := c.Stats()
	postAdmin(t, ws[0].url, `{"kv_events_drop":1}`)
	generate(t, ws[0].url, b) // its batch never reaches the subscriber
	generate(t, ws[0].url, d) // the next one shows the gap
	testutil.Eventually(t, "prompts b and d in the index", func() bool { return held(b)() && held(d)() })
	if st := c.Stats(); st.Gaps != before.Gaps+1 || st.Replayed != before.Replayed+1 || st.Cleared != 0 {
		t.Fatalf("after a dropped batch: %+v (before %+v), want one more gap, replayed", st, before)
	}

	postAdmin(t, ws[0].url, `{"kv_events_restart":true}`)
	e := mockPrompt(4, 0, 0, 4)
	generate(t, ws[0].url, e)
	testutil.Eventually(t, "prompt e in the index", held(e))
	if st := c.Stats(); st.Cleared != 1 {
		t.Fatalf("after a restarted sequence: %+v, want the worker cleared once", st)
	}
	if idx.Match(a, depth); depth[0] != 0 {
		t.Fatalf("prompt a still matches %d blocks after the worker was cleared", depth[0])
	}
}

// TestMockGRPCSubscribeKvEvents: a gRPC mock streams its events on SubscribeKvEvents; the
// index learns the prompt's blocks and a prompt sharing its prefix matches the shared part.
func TestMockGRPCSubscribeKvEvents(t *testing.T) {
	ws := startMock(t, 1, "--protocol", "grpc")
	addr := strings.TrimPrefix(ws[0].url, "grpc://")
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := sglangpb.NewSglangSchedulerClient(cc)
	idx, _ := kvindex.New(kvindex.DefaultConfig())
	h := idx.Holder(ws[0].url)
	c, err := StartGRPC(DefaultGRPCConfig(), client, IndexSink{Index: idx, Holder: h})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Subscribed from 0 (live): wait until the stream is open before the first request.
	testutil.Eventually(t, "the subscription", func() bool { return c.Stats().Reconnects == 0 })
	one := uint32(1)
	gen := func(ids []uint32) {
		st, err := client.Generate(context.Background(), &sglangpb.GenerateRequest{RequestId: fmt.Sprint(ids[0]),
			Tokenized: &sglangpb.TokenizedInput{InputIds: ids}, SamplingParams: &sglangpb.SamplingParams{MaxNewTokens: &one}})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err != nil {
				break
			}
		}
	}
	depth := make([]uint32, 1)
	p := mockPrompt(5, 0, 3, 5)
	// The stream may open after the first request's events: resend until they are seen.
	testutil.Eventually(t, "the prompt's blocks from the gRPC stream", func() bool {
		gen(p)
		idx.Match(p, depth)
		return depth[0] == 5
	})
	q := mockPrompt(5, 1, 3, 5)
	if idx.Match(q, depth); depth[0] != 3 {
		t.Fatalf("a prompt sharing 3 blocks matches %d", depth[0])
	}
	if st := c.Stats(); st.Dropped != 0 || c.Err() != nil {
		t.Fatalf("stats %+v err %v", st, c.Err())
	}
}

// indexSource hands cache_aware the test's index for every model.
type indexSource struct{ idx *kvindex.Index }

func (s indexSource) EventIndex(string) cacheaware.EventIndex { return s.idx }

// TestCacheAwareRoutesOnAMockEnginesEvents: cache_aware in event mode sends a prompt to the
// mock engine whose events say it holds the prompt, and a prompt nobody holds by load.
func TestCacheAwareRoutesOnAMockEnginesEvents(t *testing.T) {
	ws := startMock(t, 3)
	fleet := policytest.NewFleet(t, 3, "m")
	idx, _ := kvindex.New(kvindex.DefaultConfig())
	for i, w := range ws {
		h := idx.Holder(fleet.Workers[i].URL) // the gateway's name of mock worker i
		cfg := DefaultZMQConfig()
		cfg.Endpoint, cfg.ReplayEndpoint = w.events, w.replay
		c, err := StartZMQ(cfg, func(int) Sink { return IndexSink{Index: idx, Holder: h} })
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	pcfg := cacheaware.DefaultConfig()
	pcfg.Events, pcfg.Metrics = indexSource{idx}, metrics.NewSet()
	picker := cacheaware.New(pcfg, testutil.NewRand(1)).Build(fleet.Group("m"))
	depth := make([]uint32, 3)
	for target := range 3 {
		p := mockPrompt(10+target, 0, 0, 8)
		generate(t, ws[target].url, p)
		testutil.Eventually(t, "the prompt in the index", func() bool {
			idx.Match(p, depth)
			return depth[target] == 8
		})
		if target == 0 {
			// The index knows the block size now: picks made before were the tree's.
			picker = cacheaware.New(pcfg, testutil.NewRand(1)).Build(fleet.Group("m"))
		}
		res, err := picker.Pick(&policy.Request{Tokens: append(p, 1, 2, 3)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Worker != fleet.Workers[target] {
			t.Fatalf("a prompt mock worker %d holds went to %s", target, res.Worker.URL)
		}
	}
	if n := pcfg.Metrics.GetOrCreateCounter("smg_cache_aware_event_mode_picks_total").Get(); n != 3 {
		t.Fatalf("%d picks in event mode, want 3", n)
	}
}
