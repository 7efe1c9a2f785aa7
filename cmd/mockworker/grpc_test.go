package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/tokenizer"
)

var grpcReadyLine = regexp.MustCompile(`^mockworker: worker (\d+) listening on grpc://([0-9.]+:\d+) \(model (\S+), dialect (\w+)\)$`)

// startGRPC runs the binary with args and returns the workers' addresses read from its ready
// lines (--port 0: the kernel picks each port and the process reports it). The process is
// stopped with SIGTERM at the end of the test and must exit 0.
func startGRPC(t testing.TB, count int, args ...string) (addrs []string, pid int) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mockworker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for len(addrs) < count && sc.Scan() {
		m := grpcReadyLine.FindStringSubmatch(sc.Text())
		if m == nil {
			_ = cmd.Process.Kill()
			t.Fatalf("unexpected line %q; stderr: %s", sc.Text(), stderr.String())
		}
		addrs = append(addrs, m[2])
	}
	if len(addrs) != count {
		_ = cmd.Process.Kill()
		t.Fatalf("got %d ready lines (%v); stderr: %s", len(addrs), sc.Err(), stderr.String())
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr: %s", err, stderr.String())
		}
	})
	return addrs, cmd.Process.Pid
}

func dialGRPC(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// generated is one SGLang Generate call's result.
type generated struct {
	ids    []uint32
	chunks int
	end    *sglangpb.GenerateComplete
	err    error
}

func sglangGenerate(ctx context.Context, c sglangpb.SglangSchedulerClient, id string, prompt []uint32, maxTokens uint32, mutate ...func(*sglangpb.SamplingParams)) generated {
	sp := sglangpb.DefaultSamplingParams()
	sp.MaxNewTokens = &maxTokens
	for _, m := range mutate {
		m(sp)
	}
	st, err := c.Generate(ctx, &sglangpb.GenerateRequest{RequestId: id, Tokenized: &sglangpb.TokenizedInput{InputIds: prompt},
		SamplingParams: sp, Stream: true, LogprobStartLen: -1})
	var g generated
	if err != nil {
		g.err = err
		return g
	}
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return g
		}
		if err != nil {
			g.err = err
			return g
		}
		if ch := m.GetChunk(); ch != nil {
			g.ids = append(g.ids, ch.TokenIds...)
			g.chunks++
		}
		if e := m.GetComplete(); e != nil {
			g.end = e
		}
	}
}

func prompt(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(100 + i)
	}
	return ids
}

// noLeaks asserts that the worker's GetLoads reports nothing running, waiting or held,
// polling while a cancelled call's handler finishes on the server.
func noLeaks(t *testing.T, c sglangpb.SglangSchedulerClient, after string) {
	t.Helper()
	var last *sglangpb.SchedulerLoad
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		loads, err := c.GetLoads(context.Background(), &sglangpb.GetLoadsRequest{})
		if err != nil {
			t.Fatalf("GetLoads after %s: %v", after, err)
		}
		last = loads.Loads[0]
		if last.NumRunningReqs == 0 && last.NumWaitingReqs == 0 && last.NumUsedTokens == 0 {
			return
		}
	}
	t.Fatalf("after %s the worker still holds requests: %v", after, last)
}

func TestGRPCProcessSGLang(t *testing.T) {
	addrs, _ := startGRPC(t, 2, "--protocol", "grpc", "--mode", "engine", "--time-scale", "20",
		"--port", "0", "--count", "2", "--model", "tiny", "--dialect", "sglang")
	for _, addr := range addrs {
		c := sglangpb.NewSglangSchedulerClient(dialGRPC(t, addr))

		// n concurrent streams: token counts, ids and finish reasons.
		const streams = 16
		results := make([]generated, streams)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() { results[i] = sglangGenerate(t.Context(), c, "s"+string(rune('a'+i)), prompt(50+i), 32) })
		}
		wg.Wait()
		for i, r := range results {
			if r.err != nil || r.chunks != 32 || r.end == nil || r.end.FinishReason != "length" ||
				r.end.CompletionTokens != 32 || r.end.PromptTokens != uint32(50+i) {
				t.Fatalf("%s stream %d: %v, %d chunks, %v", addr, i, r.err, r.chunks, r.end)
			}
			for j, id := range r.ids {
				if id != mockworker.PositionTokenBase+uint32(j%10) {
					t.Fatalf("%s stream %d: ids %v", addr, i, r.ids)
				}
			}
		}
		noLeaks(t, c, "the streams")

		// Abort frees the slot.
		ctx, cancel := context.WithCancel(t.Context())
		long := sglangpb.DefaultSamplingParams()
		long.MaxNewTokens = new(uint32(100000))
		st, err := c.Generate(ctx, &sglangpb.GenerateRequest{RequestId: "long", Stream: true,
			Tokenized: &sglangpb.TokenizedInput{InputIds: prompt(64)}, SamplingParams: long})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		loads, err := c.GetLoads(t.Context(), &sglangpb.GetLoadsRequest{})
		if err != nil || loads.Loads[0].NumRunningReqs != 1 {
			t.Fatalf("before the abort: %v %v", err, loads)
		}
		if a, err := c.Abort(t.Context(), &sglangpb.AbortRequest{RequestId: "long"}); err != nil || !a.Success {
			t.Fatalf("abort: %v %v", err, a)
		}
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatalf("aborted stream: %v", err)
			}
			if e := m.GetComplete(); e != nil {
				if e.FinishReason != "abort" {
					t.Fatalf("aborted: %v", e)
				}
				break
			}
		}
		cancel()
		noLeaks(t, c, "the abort")

		// Each fault knob, then no leak.
		with := func(fault string) context.Context {
			return metadata.AppendToOutgoingContext(t.Context(), "x-mock-fault", fault)
		}
		if r := sglangGenerate(with("status=503"), c, "f1", prompt(20), 8); status.Code(r.err) != codes.Unavailable || r.chunks != 0 {
			t.Errorf("status=503: %v, %d chunks", r.err, r.chunks)
		}
		noLeaks(t, c, "status=503")
		if r := sglangGenerate(with("abort-after=5"), c, "f2", prompt(20), 8); status.Code(r.err) != codes.Internal || r.chunks != 5 || r.end != nil {
			t.Errorf("abort-after=5: %v, %d chunks, %v", r.err, r.chunks, r.end)
		}
		noLeaks(t, c, "abort-after=5")
		hctx, hcancel := context.WithTimeout(with("hang"), 200*time.Millisecond)
		if r := sglangGenerate(hctx, c, "f3", prompt(20), 8); status.Code(r.err) != codes.DeadlineExceeded || r.chunks != 0 {
			t.Errorf("hang: %v, %d chunks", r.err, r.chunks)
		}
		hcancel()
		noLeaks(t, c, "hang")

		// The worker-wide knob: POST /admin/config on the same port.
		admin := func(body string) {
			resp, err := http.Post("http://"+addr+"/admin/config", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("admin %s: %d", body, resp.StatusCode)
			}
		}
		admin(`{"status":503}`)
		if r := sglangGenerate(t.Context(), c, "f4", prompt(20), 8); status.Code(r.err) != codes.Unavailable {
			t.Errorf("admin status 503: %v", r.err)
		}
		admin(`{"status":0}`)
		if r := sglangGenerate(t.Context(), c, "f5", prompt(20), 8); r.err != nil || r.chunks != 8 {
			t.Errorf("admin cleared: %v, %d chunks", r.err, r.chunks)
		}
		noLeaks(t, c, "the admin status")
	}
}

func TestGRPCProcessVLLM(t *testing.T) {
	addrs, _ := startGRPC(t, 1, "--protocol", "grpc", "--dialect", "vllm", "--mode", "engine", "--time-scale", "20", "--port", "0")
	c := vllmpb.NewVllmEngineClient(dialGRPC(t, addrs[0]))
	maxTokens := uint32(6)
	sp := vllmpb.DefaultSamplingParams()
	sp.MaxTokens = &maxTokens
	st, err := c.Generate(t.Context(), &vllmpb.GenerateRequest{RequestId: "v", SamplingParams: sp, Stream: true,
		Input: &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: prompt(30)}}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	var end *vllmpb.GenerateComplete
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch := m.GetChunk(); ch != nil {
			ids = append(ids, ch.TokenIds...)
		}
		if e := m.GetComplete(); e != nil {
			end = e
		}
	}
	want := []uint32{1000, 1001, 1002, 1003, 1004, 1005}
	if !slices.Equal(ids, want) || end.GetFinishReason() != "length" || end.GetCompletionTokens() != 6 {
		t.Fatalf("ids %v, complete %v", ids, end)
	}
	loads, err := c.GetLoads(t.Context(), &vllmpb.GetLoadsRequest{})
	if err != nil || loads.Loads[0].NumRunningReqs != 0 || loads.Loads[0].NumUsedTokens != 0 {
		t.Fatalf("loads: %v %v", err, loads)
	}
}

// BenchmarkGRPCProcessStream measures the mock process alone: the CPU (user+system, from
// /proc/PID/stat) an instant-mode gRPC worker spends per streamed 128-token SGLang Generate
// with a 1024-token prompt, one stream at a time.
func BenchmarkGRPCProcessStream(b *testing.B) {
	addrs, pid := startGRPC(b, 1, "--protocol", "grpc", "--port", "0")
	c := sglangpb.NewSglangSchedulerClient(dialGRPC(b, addrs[0]))
	maxTokens := uint32(128)
	run := func() {
		if g := sglangGenerate(b.Context(), c, "bench", prompt(1024), maxTokens); g.err != nil || g.chunks != 128 {
			b.Fatalf("%v, %d chunks", g.err, g.chunks)
		}
	}
	run()
	before := processCPU(b, pid)
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(processCPU(b, pid)-before)/float64(time.Microsecond)/float64(b.N), "mock-cpu-µs/stream")
}

// processCPU is process pid's user plus system time (fields 14 and 15 of /proc/PID/stat, in
// clock ticks of 10 ms: run enough iterations).
func processCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; the fields after it are plain.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestGRPCProcessQwen3Answer runs the process with the real Qwen3 tokenizer: concurrent
// streams decode to the known answer text and end with Qwen3's EOS.
func TestGRPCProcessQwen3Answer(t *testing.T) {
	dir := os.Getenv("SMG_TOKENIZER_DATA")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "smg-tokenizers", "v1")
	}
	dir = filepath.Join(dir, "qwen3")
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatalf("Qwen3 tokenizer (run make tools): %v", err)
	}
	addrs, _ := startGRPC(t, 1, "--protocol", "grpc", "--mode", "engine", "--time-scale", "20", "--port", "0", "--tokenizer-path", dir)
	c := sglangpb.NewSglangSchedulerClient(dialGRPC(t, addrs[0]))
	input := tok.Encode(nil, "<|im_start|>user\nWho sat on the mat?<|im_end|>\n<|im_start|>assistant\n", false)
	results := make([]generated, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = sglangGenerate(t.Context(), c, "q"+strconv.Itoa(i), input, 256) })
	}
	wg.Wait()
	eos := tok.EOSTokenIDs()
	for i, r := range results {
		if r.err != nil || r.end == nil || r.end.FinishReason != "stop" || !slices.Contains(eos, r.end.GetMatchedTokenId()) ||
			int(r.end.CompletionTokens) != len(r.ids) || r.ids[len(r.ids)-1] != r.end.GetMatchedTokenId() {
			t.Fatalf("stream %d: %v %v %v", i, r.err, r.ids, r.end)
		}
		if got := string(tok.Decode(nil, r.ids, true)); got != mockworker.AnswerText {
			t.Errorf("stream %d decodes to %q, want %q", i, got, mockworker.AnswerText)
		}
	}
	noLeaks(t, c, "the streams")
}
