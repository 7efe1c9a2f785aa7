package kvevents

import (
	"bytes"
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

	"github.com/smg-go/smg/internal/syncbuf"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/kvevents/kvindex"
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
		dir, err := os.MkdirTemp("", "kvevents-mock-")
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
