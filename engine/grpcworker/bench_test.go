package grpcworker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"google.golang.org/grpc"
)

const benchServerEnv = "GRPCWORKER_BENCH_SERVER"

// serveForBenchmark runs the test engine of dialect d on 127.0.0.1, prints its address and
// serves until its standard input closes (the benchmark ended).
func serveForBenchmark(d string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eng := &engine{peers: map[string]int{}, started: make(chan string, 1024)}
	srv := grpc.NewServer()
	if d == "sglang" {
		sglangpb.RegisterSglangSchedulerServer(srv, sglangEngine{engine: eng})
	} else {
		vllmpb.RegisterVllmEngineServer(srv, vllmEngine{engine: eng})
	}
	go func() { _ = srv.Serve(l) }()
	fmt.Println(l.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Stop()
}

// startBenchServer runs serveForBenchmark in a child process.
func startBenchServer(b *testing.B, d Dialect) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"="+d.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("bench server: %v", err)
	}
	return strings.TrimSpace(addr)
}

// BenchmarkRecv measures the client's cost per received chunk of one token (one Recv), the
// engine running in another process so that only the client's allocations are counted.
func BenchmarkRecv(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.String(), func(b *testing.B) {
			addr := startBenchServer(b, d)
			c, err := Dial(context.Background(), addr, d, DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			s, err := c.Generate(context.Background(), &GenerateRequest{RequestID: "bench-1", InputIDs: []uint32{1}, Stream: true,
				Sampling: Sampling{MaxNewTokens: Some(uint32(b.N))}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ch, err := s.Recv()
				if err != nil || len(ch.TokenIDs) != 1 {
					b.Fatalf("chunk %+v, %v", ch, err)
				}
			}
			b.StopTimer()
			if ch, err := s.Recv(); err != nil || !ch.Final {
				b.Fatalf("after %d chunks: %+v, %v; want the final chunk", b.N, ch, err)
			}
		})
	}
}
