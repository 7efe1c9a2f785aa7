package mockworker

import (
	"bytes"
	"context"
	"encoding/binary"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/smg-go/smg/internal/testutil"
)

// subscribe connects a ZMQ SUB socket to a worker's events; frames arrive on the channel.
func subscribe(t *testing.T, w *Worker) <-chan [][]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := zmq4.NewSub(ctx, zmq4.WithLogger(quietZMQ))
	if err := sub.Dial(w.KVEventsEndpoint()); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	out := make(chan [][]byte, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			out <- msg.Frames
		}
	}()
	t.Cleanup(func() { cancel(); sub.Close(); <-done })
	return out
}

// generic decodes a batch payload as plain msgpack values.
func generic(t *testing.T, payload []byte) any {
	t.Helper()
	var v any
	if err := msgpack.Unmarshal(payload, &v); err != nil {
		t.Fatalf("the batch is not msgpack: %v", err)
	}
	return v
}

// TestKVEventsShapes: a computed prompt is published as one BlockStored of its full blocks,
// in vLLM's tagged maps or SGLang's tagged arrays, with the sequence in the frame; the replay
// socket resends it and ends with -1.
func TestKVEventsShapes(t *testing.T) {
	for _, enc := range []KVEncoding{KVEncodingMap, KVEncodingArray} {
		t.Run(string(enc), func(t *testing.T) {
			f := startFleet(t, config(func(c *Config) {
				c.Mode, c.TimeScale, c.OutputTokens, c.KVEvents, c.KVEventsEncoding = ModeEngine, 1000, 1, true, enc
			}))
			w := f.Workers()[0]
			frames := subscribe(t, w)
			// The subscription reaches the PUB socket asynchronously: send prompts until a batch
			// arrives, a new prompt each time (a repeated one is a cache hit and stores nothing).
			var got [][]byte
			sent := 0
			testutil.Eventually(t, "a published batch", func() bool {
				select {
				case got = <-frames:
					return true
				default:
					sent++
					id := strconv.Itoa(7 + sent)
					body := `{"input_ids":[` + strings.TrimSuffix(strings.Repeat(id+",", 40), ",") + `],"sampling_params":{"max_new_tokens":1}}`
					do(t, "POST", w.URL()+"/generate", body)
					return false
				}
			})
			if len(got) != 3 || len(got[0]) != 0 || len(got[1]) != 8 {
				t.Fatalf("frames %q, want [topic, 8-byte sequence, payload]", got)
			}
			var stored any
			switch v := generic(t, got[2]).(type) {
			case map[string]any:
				if enc != KVEncodingMap || v["data_parallel_rank"] == nil {
					t.Fatalf("batch %v", v)
				}
				stored = v["events"].([]any)[0]
				ev := stored.(map[string]any)
				if ev["type"] != "BlockStored" || len(ev["block_hashes"].([]any)) != 2 || len(ev["token_ids"].([]any)) != 32 || ev["parent_block_hash"] != nil {
					t.Fatalf("event %v", ev)
				}
			case []any:
				if enc != KVEncodingArray || len(v) != 2 {
					t.Fatalf("batch %v", v)
				}
				ev := v[1].([]any)[0].([]any)
				if ev[0] != "BlockStored" || len(ev[1].([]any)) != 2 || ev[2] != nil || len(ev[3].([]any)) != 32 {
					t.Fatalf("event %v", ev)
				}
			default:
				t.Fatalf("batch %T", v)
			}

			// Replay from the batch's sequence.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d := zmq4.NewDealer(ctx, zmq4.WithLogger(quietZMQ))
			defer d.Close()
			if err := d.Dial(w.KVEventsReplayEndpoint()); err != nil {
				t.Fatal(err)
			}
			if err := d.SendMulti(zmq4.NewMsgFrom(nil, got[1])); err != nil {
				t.Fatal(err)
			}
			for {
				msg, err := d.Recv()
				if err != nil {
					t.Fatal(err)
				}
				fr := msg.Frames
				if len(fr) == 3 && len(fr[0]) == 0 {
					fr = fr[1:]
				}
				if binary.BigEndian.Uint64(fr[0]) == ^uint64(0) {
					break
				}
				if string(fr[0]) == string(got[1]) && string(fr[1]) != string(got[2]) {
					t.Fatal("the replayed batch differs from the published one")
				}
			}
		})
	}
}

// TestKVEventsConfigAndFaults: events need the engine model; the admin faults need a worker
// that publishes events.
func TestKVEventsConfigAndFaults(t *testing.T) {
	if err := config(func(c *Config) { c.KVEvents = true }).Validate(); err == nil {
		t.Fatal("kv events in instant mode accepted")
	}
	if err := config(func(c *Config) { c.Mode, c.KVEvents, c.KVEventsEncoding = ModeEngine, true, "json" }).Validate(); err == nil {
		t.Fatal("an unknown encoding accepted")
	}
	f := startFleet(t, config(func(c *Config) { c.Mode, c.TimeScale = ModeEngine, 1000 }))
	if resp, _ := do(t, "POST", f.URLs()[0]+"/admin/config", `{"kv_events_drop":1}`); resp.StatusCode != 400 {
		t.Fatalf("kv_events_drop without events: %d, want 400", resp.StatusCode)
	}
	g := startFleet(t, config(func(c *Config) { c.Mode, c.TimeScale, c.KVEvents = ModeEngine, 1000, true }))
	resp, body := do(t, "POST", g.URLs()[0]+"/admin/config", `{"kv_events_drop":2,"kv_events_restart":true}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"kv_usage"`) {
		t.Fatalf("faults: %d %s", resp.StatusCode, body)
	}
	if c := g.Workers()[0].Config(); c.KVEventsDrop != 0 || c.KVEventsRestart {
		t.Fatalf("the one-shot faults were kept: %+v", c)
	}
	p := g.Workers()[0].kvpub
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drop != 2 || p.next != 0 {
		t.Fatalf("publisher drop %d next %d, want 2 and 0", p.drop, p.next)
	}
}

// TestLosePrefixCache: lose_prefix_cache empties an engine's prefix cache (the next request
// for a cached prompt computes it all again) and publishes AllBlocksCleared; it is one-shot,
// and refused by a worker without the engine model.
func TestLosePrefixCache(t *testing.T) {
	instant := startFleet(t, config(func(c *Config) { c.TimeScale = 1000 }))
	if resp, _ := do(t, "POST", instant.URLs()[0]+"/admin/config", `{"lose_prefix_cache":true}`); resp.StatusCode != 400 {
		t.Fatalf("lose_prefix_cache in instant mode: %d, want 400", resp.StatusCode)
	}
	f := startFleet(t, config(func(c *Config) { c.Mode, c.TimeScale, c.KVEvents = ModeEngine, 1000, true }))
	url := f.URLs()[0]
	cached := regexp.MustCompile(`"cached_tokens":(\d+)`)
	ask := func() int {
		t.Helper()
		body := `{"model":"mock-model","prompt":"` + strings.Repeat("a shared system prompt ", 40) + `","max_tokens":1}`
		resp, b := do(t, "POST", url+"/v1/completions", body)
		m := cached.FindStringSubmatch(b)
		if resp.StatusCode != 200 || m == nil {
			t.Fatalf("completion: %d %s", resp.StatusCode, b)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	events := subscribe(t, f.Workers()[0])
	// Ask until the subscriber has seen a batch: it has joined (a SUB misses what was
	// published before), and the prompt is cached.
	for seen := false; !seen; {
		ask()
		select {
		case <-events:
			seen = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n := ask(); n == 0 {
		t.Fatal("the repeated prompt found nothing cached")
	}
	if resp, b := do(t, "POST", url+"/admin/config", `{"lose_prefix_cache":true}`); resp.StatusCode != 200 {
		t.Fatalf("lose_prefix_cache: %d %s", resp.StatusCode, b)
	}
	if f.Workers()[0].Config().LosePrefixCache {
		t.Fatal("the one-shot lose_prefix_cache was kept")
	}
	for cleared := false; !cleared; {
		fr := <-events
		cleared = bytes.Contains(fr[len(fr)-1], []byte("AllBlocksCleared"))
	}
	if n := ask(); n != 0 {
		t.Fatalf("%d tokens cached after the engine lost its cache, want 0", n)
	}
}
