package fastpath

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mockworker"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/worker"
)

// pdEngine is an SGLang engine of one PD role: it records the bootstrap of every request; a
// prefill engine answers one complete, a decode engine streams answer and then EOS, or, with
// hold, waits after its first token until the call ends (it records the abort).
type pdEngine struct {
	sglangpb.UnimplementedSglangSchedulerServer
	decode bool
	answer []uint32
	eos    uint32
	hold   bool
	mu     sync.Mutex
	boots  []*sglangpb.DisaggregatedParams
	aborts []string
	ended  int
}

func (e *pdEngine) Generate(req *sglangpb.GenerateRequest, st grpc.ServerStreamingServer[sglangpb.GenerateResponse]) error {
	e.mu.Lock()
	e.boots = append(e.boots, req.DisaggregatedParams)
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.ended++; e.mu.Unlock() }()
	if !e.decode {
		if e.hold {
			<-st.Context().Done()
			return st.Context().Err()
		}
		return st.Send(&sglangpb.GenerateResponse{Response: &sglangpb.GenerateResponse_Complete{Complete: &sglangpb.GenerateComplete{OutputIds: e.answer[:1], FinishReason: "length", PromptTokens: 4, CompletionTokens: 1}}})
	}
	for i, id := range append(e.answer, e.eos) {
		if err := st.Send(&sglangpb.GenerateResponse{Response: &sglangpb.GenerateResponse_Chunk{Chunk: &sglangpb.GenerateStreamChunk{TokenIds: []uint32{id}, PromptTokens: 4}}}); err != nil {
			return err
		}
		if e.hold && i == 0 {
			<-st.Context().Done()
			return st.Context().Err()
		}
	}
	return st.Send(&sglangpb.GenerateResponse{Response: &sglangpb.GenerateResponse_Complete{Complete: &sglangpb.GenerateComplete{FinishReason: "stop", MatchedStop: &sglangpb.GenerateComplete_MatchedTokenId{MatchedTokenId: e.eos}, PromptTokens: 4, CompletionTokens: uint32(len(e.answer) + 1)}}})
}

func (e *pdEngine) Abort(_ context.Context, r *sglangpb.AbortRequest) (*sglangpb.AbortResponse, error) {
	e.mu.Lock()
	e.aborts = append(e.aborts, r.RequestId)
	e.mu.Unlock()
	return &sglangpb.AbortResponse{Success: true}, nil
}

func (e *pdEngine) stats() (boots []*sglangpb.DisaggregatedParams, aborts []string, ended int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append(boots, e.boots...), append(aborts, e.aborts...), e.ended
}

func serveEngine(t *testing.T, e *pdEngine) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sglangpb.RegisterSglangSchedulerServer(srv, e)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// newGRPCPDGateway is a PD gateway over one prefill and one decode engine.
func newGRPCPDGateway(t *testing.T, tok *tokenizer.Tokenizer, prefill, decode *pdEngine) *gateway {
	t.Cleanup(func() { noGRPCCalls(t) })
	return newGRPCPDGatewayOn(t, tok, serveEngine(t, prefill), serveEngine(t, decode), grpcworker.SGLang, map[string]string{worker.LabelBootstrapPort: "9123"})
}

// newGRPCPDGatewayOn is a PD gateway over the engines at paddr (prefill, with labels) and
// daddr (decode) speaking dialect d.
func newGRPCPDGatewayOn(t *testing.T, tok *tokenizer.Tokenizer, paddr, daddr string, d grpcworker.Dialect, labels map[string]string) *gateway {
	model := GRPCModel{ID: "qwen3", Tokenizer: tok, EOSTokenIDs: tok.EOSTokenIDs()}
	var mu sync.Mutex
	conns := map[string]*grpcworker.Client{}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	cfg := Config{GRPC: &GRPCBackend{
		IsGRPC: func(*worker.Worker) bool { return true },
		Client: func(w *worker.Worker) (*grpcworker.Client, error) {
			mu.Lock()
			defer mu.Unlock()
			addr := strings.TrimPrefix(w.URL, "http://")
			if c := conns[addr]; c != nil {
				return c, nil
			}
			c, err := grpcworker.Dial(context.Background(), addr, d, grpcworker.DefaultConfig())
			if err == nil {
				conns[addr] = c
			}
			return c, err
		},
		Model:      func(string) (GRPCModel, bool) { return model, true },
		Tokenizers: 2,
	}}
	g := &gateway{t: t, fakes: map[string]*fakeWorker{}}
	rc := policy.RouterConfig{DefaultPolicy: "round_robin", PD: &policy.PDPolicies{Prefill: "round_robin", Decode: "round_robin"}}
	g.start(cfg, rc, func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }, func() {
		for _, s := range []worker.Spec{
			{URL: "http://" + paddr, ModelID: "qwen3", WorkerType: worker.TypePrefill, Labels: labels},
			{URL: "http://" + daddr, ModelID: "qwen3", WorkerType: worker.TypeDecode},
		} {
			if err := s.Normalize(); err != nil {
				t.Fatal(err)
			}
			if _, err := g.reg.Add(context.Background(), s, worker.StatusReady); err != nil {
				t.Fatal(err)
			}
		}
		g.waitTable(func(n int) bool { return n >= 2 })
	})
	return g
}

// SGLang's PD handover over gRPC: both legs get the prefill worker's bootstrap address and
// the same room; the decode leg's tokens are the answer.
func TestGRPCPDBootstrap(t *testing.T) {
	tok, err := tokenizer.Load(qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	answer := tok.Encode(nil, mockworker.AnswerText, false)
	prefill := &pdEngine{answer: answer, eos: tok.EOSTokenIDs()[0]}
	decode := &pdEngine{decode: true, answer: answer, eos: tok.EOSTokenIDs()[0]}
	g := newGRPCPDGateway(t, tok, prefill, decode)
	for _, stream := range []string{"", `,"stream":true`} {
		resp := g.do("POST", "/v1/completions", `{"model":"qwen3","prompt":"Say something.","max_tokens":100`+stream+`}`)
		body := string(resp.Body())
		if resp.StatusCode() != 200 {
			t.Fatalf("%d %s", resp.StatusCode(), body)
		}
		var text strings.Builder
		if stream == "" {
			if !strings.Contains(body, `"text":`+fmt.Sprintf("%q", mockworker.AnswerText)) {
				t.Fatalf("answer %s", body)
			}
		} else {
			for _, ev := range events(t, body) {
				if i := strings.Index(ev, `"text":"`); i >= 0 {
					rest := ev[i+len(`"text":"`):]
					text.WriteString(rest[:strings.Index(rest, `"`)])
				}
			}
			if text.String() != mockworker.AnswerText {
				t.Fatalf("streamed %q", text.String())
			}
		}
	}
	// The legs run at once and these fakes do not make the decode leg wait for the prefill's
	// KV: an answer can be complete before its prefill leg has reached the fake.
	testutil.Eventually(t, "both prefill legs at the prefill engine", func() bool {
		pb, _, _ := prefill.stats()
		return len(pb) == 2
	})
	pb, pa, _ := prefill.stats()
	db, da, _ := decode.stats()
	if len(pb) != 2 || len(db) != 2 || len(pa) != 0 || len(da) != 0 {
		t.Fatalf("prefill saw %d requests and %d aborts, decode %d and %d", len(pb), len(pa), len(db), len(da))
	}
	for i := range pb {
		p, d := pb[i], db[i]
		if p == nil || d == nil || p.BootstrapHost != "127.0.0.1" || p.BootstrapPort != 9123 || p.BootstrapRoom != d.BootstrapRoom ||
			d.BootstrapHost != p.BootstrapHost || d.BootstrapPort != p.BootstrapPort {
			t.Fatalf("request %d: prefill %v, decode %v", i, p, d)
		}
	}
	if pb[0].BootstrapRoom == pb[1].BootstrapRoom {
		t.Fatal("two requests shared a bootstrap room")
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// A client that leaves a PD stream: both engines are told (each gets an Abort) and the
// in-flight counts of both legs are back to 0.
func TestGRPCPDClientGoneAbortsBothLegs(t *testing.T) {
	tok, err := tokenizer.Load(qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	answer := tok.Encode(nil, mockworker.AnswerText, false)
	prefill := &pdEngine{answer: answer, eos: tok.EOSTokenIDs()[0], hold: true}
	decode := &pdEngine{decode: true, answer: answer, eos: tok.EOSTokenIDs()[0], hold: true}
	g := newGRPCPDGateway(t, tok, prefill, decode)
	conn, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"qwen3","prompt":"Say something.","max_tokens":100,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	buf := make([]byte, 4096)
	var got string
	for !strings.Contains(got, `"text":"the"`) {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("%v after %q", err, got)
		}
		got += string(buf[:n])
	}
	if g.inFlight() != 2 {
		t.Fatalf("in flight %d, want a unit on each leg", g.inFlight())
	}
	conn.Close()
	testutil.Eventually(t, "both engines aborted", func() bool {
		_, pa, _ := prefill.stats()
		_, da, _ := decode.stats()
		return len(pa) == 1 && len(da) == 1
	})
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}

// vllmPDEngine is a vLLM engine of one PD role: the prefill engine answers one token and its
// KV parameters, the decode engine streams the answer; both record what they were sent.
type vllmPDEngine struct {
	vllmpb.UnimplementedVllmEngineServer
	decode bool
	answer []uint32
	mu     sync.Mutex
	params []string
	maxNew []uint32
}

const vllmKV = `{"remote_engine_id":"e1","remote_block_ids":[1,2],"remote_host":"10.0.0.7","remote_port":5600}`

func (e *vllmPDEngine) Generate(req *vllmpb.GenerateRequest, st grpc.ServerStreamingServer[vllmpb.GenerateResponse]) error {
	e.mu.Lock()
	e.params = append(e.params, req.GetKvTransferParamsJson())
	e.maxNew = append(e.maxNew, req.GetSamplingParams().GetMaxTokens())
	e.mu.Unlock()
	if !e.decode {
		kv := vllmKV
		return st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: &vllmpb.GenerateComplete{OutputIds: e.answer[:1], FinishReason: "length", PromptTokens: 4, CompletionTokens: 1, KvTransferParamsJson: &kv}}})
	}
	for _, id := range e.answer {
		if err := st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Chunk{Chunk: &vllmpb.GenerateStreamChunk{TokenIds: []uint32{id}, PromptTokens: 4}}}); err != nil {
			return err
		}
	}
	return st.Send(&vllmpb.GenerateResponse{Response: &vllmpb.GenerateResponse_Complete{Complete: &vllmpb.GenerateComplete{FinishReason: "length", PromptTokens: 4, CompletionTokens: uint32(len(e.answer))}}})
}

// vLLM's PD handover over gRPC: the prefill leg runs one token asking for a remote decode,
// and the decode leg carries the KV parameters the prefill engine answered.
func TestGRPCPDVLLMKVTransfer(t *testing.T) {
	t.Cleanup(func() { noGRPCCalls(t) })
	tok, err := tokenizer.Load(qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	answer := tok.Encode(nil, mockworker.AnswerText, false)
	serve := func(e *vllmPDEngine) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		vllmpb.RegisterVllmEngineServer(srv, e)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		return ln.Addr().String()
	}
	prefill, decode := &vllmPDEngine{answer: answer}, &vllmPDEngine{decode: true, answer: answer}
	g := newGRPCPDGatewayOn(t, tok, serve(prefill), serve(decode), grpcworker.VLLM, map[string]string{worker.LabelKVConnector: "NixlConnector"})
	resp := g.do("POST", "/v1/completions", `{"model":"qwen3","prompt":"hi","max_tokens":100}`)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), fmt.Sprintf(`"text":%q`, mockworker.AnswerText)) {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
	}
	prefill.mu.Lock()
	decode.mu.Lock()
	defer prefill.mu.Unlock()
	defer decode.mu.Unlock()
	if len(prefill.params) != 1 || !strings.Contains(prefill.params[0], `"do_remote_decode":true`) || prefill.maxNew[0] != 1 {
		t.Fatalf("prefill leg: params %q, max tokens %v", prefill.params, prefill.maxNew)
	}
	if len(decode.params) != 1 || decode.params[0] != vllmKV || decode.maxNew[0] != 100 {
		t.Fatalf("decode leg: params %q, max tokens %v", decode.params, decode.maxNew)
	}
}
