package mockworker

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkHandle measures the handler alone (no I/O): parse, render, for the null path.
func BenchmarkHandle(b *testing.B) {
	cfg := DefaultConfig()
	w := newWorker(0, "127.0.0.1:1", &cfg, 0)
	for _, bc := range []struct {
		name string
		ex   exchange
	}{
		{"chat", exchange{method: []byte("POST"), path: []byte("/v1/chat/completions"),
			body: []byte(`{"model":"mock-model","messages":[{"role":"user","content":"Hello, how are you today? Tell me a story."}],"max_tokens":16}`)}},
		{"generate", exchange{method: []byte("POST"), path: []byte("/generate"),
			body: []byte(`{"text":"Hello, how are you today? Tell me a story.","sampling_params":{"max_new_tokens":16}}`)}},
		{"health", exchange{method: []byte("GET"), path: []byte("/health")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				buf = w.handle(&bc.ex, buf[:0]).body
			}
		})
	}
}

// BenchmarkStreamEvents measures rendering one 16-token chat stream as HTTP chunks.
func BenchmarkStreamEvents(b *testing.B) {
	a := answer{kind: kindChat, model: "mock-model", id: []byte("chatcmpl-mock-0-1"), created: 1, promptTokens: 11, outputTokens: 16, includeUsage: true}
	buf := make([]byte, 0, 8192)
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range a.outputTokens {
			buf = appendChunk(buf, &a, i)
		}
	}
}

// BenchmarkEngineStep measures one step of the engine model with 64 sequences decoding.
func BenchmarkEngineStep(b *testing.B) {
	p := engineParams{maxRunning: 256, kvTokens: 1 << 24, blockSize: 16, prefillTPS: 16000,
		prefillChunk: 8192, decodeBase: 8 * time.Millisecond, decodePerReq: 100 * time.Microsecond}
	e := newEngine(p)
	for i := range 64 {
		s := &seq{hashes: promptBlockHashes(nil, []byte(strings.Repeat(string(rune('a'+i%26)), 256+i)), nil, 16),
			promptTokens: 64 + i, maxTokens: 1 << 17}
		if err := e.submit(s, 0); err != nil {
			b.Fatal(err)
		}
	}
	now, _, _ := e.step(0, 1, 1) // prefill everything
	b.ReportAllocs()
	for b.Loop() {
		var out []emission
		now, out, _ = e.step(now, 1, 1)
		if len(out) != 64 {
			b.Fatalf("%d sequences stepped, want 64", len(out))
		}
	}
}

// BenchmarkEngineStreams runs `conc` concurrent 32-token streams against an engine-mode
// worker in real time (default model: 8 ms + 0.1 ms per sequence a step) and reports the
// inter-token latency the clients saw next to the model's, and how far the last token of a
// stream drifted from its model time.
func BenchmarkEngineStreams(b *testing.B) {
	for _, conc := range []int{1, 16, 64} {
		b.Run("conc="+strconv.Itoa(conc), func(b *testing.B) {
			f, err := Start(config(func(c *Config) { c.Mode, c.OutputTokens = ModeEngine, 32 }))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var itlSum time.Duration
			var itlN int
			var mu sync.Mutex
			for b.Loop() {
				var wg sync.WaitGroup
				for range conc {
					wg.Go(func() {
						times := streamTimes(b, f.Addrs()[0])
						mu.Lock()
						for i := 2; i < len(times); i++ { // from the second token on: decode steps only
							itlSum += times[i].Sub(times[i-1])
							itlN++
						}
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			model := DefaultDecodeBase + time.Duration(conc)*DefaultDecodePerReq
			b.ReportMetric(float64(itlSum)/float64(itlN)/1e6, "itl-ms")
			b.ReportMetric(float64(model)/1e6, "model-itl-ms")
		})
	}
}

// streamTimes sends one streamed completion on a fresh connection and returns when each
// event arrived.
func streamTimes(b *testing.B, addr string) []time.Time {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Error(err)
		return nil
	}
	defer c.Close()
	body := `{"prompt":"hello world","stream":true}`
	if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		b.Error(err)
		return nil
	}
	br := bufio.NewReader(c)
	var times []time.Time
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			b.Error(err)
			return times
		}
		if strings.HasPrefix(line, "data: [DONE]") {
			return times
		}
		if strings.HasPrefix(line, "data: ") {
			times = append(times, time.Now())
		}
	}
}
