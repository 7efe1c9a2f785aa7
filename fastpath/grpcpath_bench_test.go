package fastpath

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/mockworker"
)

func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchPrompt is a 4 KB user message.
func benchPrompt() string {
	var sb strings.Builder
	for i := 0; sb.Len() < 4096; i++ {
		fmt.Fprintf(&sb, "Sentence %d of the prompt talks about routing, caches and tokens. ", i)
	}
	return sb.String()
}

// BenchmarkGRPCStreamedChat4KB runs streamed chat requests (4 KB prompt, 128 tokens) through
// the gateway to an in-process mock gRPC engine (instant mode) over loopback, one at a time.
// cpu-ns/op is the whole process's CPU per request: the gateway, the mock engine and the
// client. BenchmarkGRPCDirect measures the mock engine and a gRPC client alone, for the
// difference.
func BenchmarkGRPCStreamedChat4KB(b *testing.B) {
	for _, n := range []int{128, 256} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) { benchStreamedChat(b, n, mockworker.ModeInstant) })
	}
	// Paced: the engine model's decode steps (time scale 20), a token per gRPC message and
	// per SSE write, as a real engine streams.
	b.Run("tokens=128/paced", func(b *testing.B) { benchStreamedChat(b, 128, mockworker.ModeEngine) })
}

func benchStreamedChat(b *testing.B, tokens int, mode mockworker.Mode) {
	g := newGRPCGatewayTB(b, mockworker.DialectSGLang, 1, "round_robin", Config{}, func(c *mockworker.Config) {
		c.Mode, c.TimeScale = mode, 20
	})
	body := fmt.Sprintf(`{"model":"qwen3","stream":true,"max_tokens":%d,"ignore_eos":true,"messages":[{"role":"user","content":%q}]}`, tokens, benchPrompt())
	conn, err := g.ln.Dial()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	one := func() {
		if _, err := io.WriteString(conn, req); err != nil {
			b.Fatal(err)
		}
		readChunked(b, br)
	}
	one()
	b.ReportAllocs()
	b.ResetTimer()
	start := processCPU()
	for range b.N {
		one()
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// readChunked reads one chunked HTTP answer whole.
func readChunked(b *testing.B, br *bufio.Reader) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
		if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
			b.Fatalf("status %s", line)
		}
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.Discard(int(n) + 2); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// BenchmarkGRPCDirect is the mock engine's part of BenchmarkGRPCStreamedChat4KB: the
// same generation (the 4 KB prompt's ids, 128 tokens) read by a gRPC client directly.
func BenchmarkGRPCDirect(b *testing.B) {
	for _, n := range []uint32{128, 256} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) { benchDirect(b, n) })
	}
}

func benchDirect(b *testing.B, tokens uint32) {
	g := newGRPCGatewayB(b)
	tok := g.tok
	ids := tok.Encode(nil, benchPrompt(), false)
	c, err := grpcworker.Dial(context.Background(), g.fleet.Addrs()[0], grpcworker.SGLang, grpcworker.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := grpcworker.GenerateRequest{InputIDs: ids, Stream: true}
	req.Sampling.MaxNewTokens, req.Sampling.IgnoreEOS = grpcworker.Some(tokens), true
	b.ReportAllocs()
	b.ResetTimer()
	start := processCPU()
	for i := range b.N {
		req.RequestID = "direct-" + strconv.Itoa(i)
		st, err := c.Generate(context.Background(), &req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := st.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

func newGRPCGatewayB(b *testing.B) *grpcGateway {
	return newGRPCGatewayTB(b, mockworker.DialectSGLang, 1, "round_robin", Config{}, func(c *mockworker.Config) {
		c.Mode = mockworker.ModeInstant
	})
}
