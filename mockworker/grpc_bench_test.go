package mockworker

import (
	"io"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/smg-go/smg/engine/sglangpb"
)

// BenchmarkGRPCStream measures one streamed 128-token SGLang Generate on an instant-mode gRPC
// worker, client and server in this process over loopback: cpu-µs/stream is the process's
// user+system CPU per stream (both ends; cmd/mockworker's BenchmarkGRPCProcessStream measures
// the mock alone), allocs/op both ends' allocations.
func BenchmarkGRPCStream(b *testing.B) {
	f, err := Start(config(func(c *Config) { c.Protocol = ProtocolGRPC }))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cc, err := grpc.NewClient(f.Addrs()[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c := sglangpb.NewSglangSchedulerClient(cc)
	req := &sglangpb.GenerateRequest{RequestId: "bench", Stream: true, SamplingParams: sglangpb.DefaultSamplingParams(),
		Tokenized: &sglangpb.TokenizedInput{InputIds: make([]uint32, 1024)}}
	req.SamplingParams.MaxNewTokens = new(uint32(128))
	run := func() {
		st, err := c.Generate(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(m.GetChunk().GetTokenIds())
		}
		if n != 128 {
			b.Fatalf("%d tokens, want 128", n)
		}
	}
	run() // the connection
	b.ReportAllocs()
	before := cpuTime(b)
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(cpuTime(b)-before)/float64(time.Microsecond)/float64(b.N), "cpu-µs/stream")
}

// cpuTime is the process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
