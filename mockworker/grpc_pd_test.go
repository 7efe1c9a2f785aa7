package mockworker

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
)

// grpcPDFleets starts a prefill and a decode fleet of one gRPC engine each in dialect d, the
// decode pointed at the prefill's rendezvous.
func grpcPDFleets(t *testing.T, d Dialect) (prefill, decode *Fleet) {
	t.Helper()
	prefill = startFleet(t, config(func(c *Config) {
		c.Protocol, c.Dialect, c.Mode, c.TimeScale, c.Role = ProtocolGRPC, d, ModeEngine, 50, RolePrefill
		c.BootstrapPort, c.KVTransferTimeout = 0, 300*time.Millisecond
	}))
	decode = startFleet(t, config(func(c *Config) {
		c.Protocol, c.Dialect, c.Mode, c.TimeScale, c.Role = ProtocolGRPC, d, ModeEngine, 50, RoleDecode
		c.BootstrapPort, c.KVTransferTimeout = prefill.BootstrapPort(), 300*time.Millisecond
	}))
	return prefill, decode
}

func TestGRPCPDSGLang(t *testing.T) {
	prefill, decode := grpcPDFleets(t, DialectSGLang)
	p := sglangpb.NewSglangSchedulerClient(dial(t, prefill, 0))
	d := sglangpb.NewSglangSchedulerClient(dial(t, decode, 0))
	leg := func(room int32, prompt []uint32, maxTokens uint32) *sglangpb.GenerateRequest {
		r := sglRequest("r", prompt, maxTokens, true)
		r.DisaggregatedParams = &sglangpb.DisaggregatedParams{BootstrapHost: "127.0.0.1", BootstrapPort: int32(prefill.BootstrapPort()), BootstrapRoom: room}
		return r
	}
	// Both legs at once, as the gateway sends them: the prefill answers one token, the
	// decode the whole answer with the prompt counted as computed.
	pr := make(chan sglStream, 1)
	go func() { pr <- sglGenerate(t.Context(), p, leg(7, promptIDs(40), 5)) }()
	dr := sglGenerate(t.Context(), d, leg(7, promptIDs(40), 5))
	got := <-pr
	if got.err != nil || len(got.ids(0)) != 1 {
		t.Fatalf("prefill leg: %v, %d tokens, want 1", got.err, len(got.ids(0)))
	}
	if dr.err != nil || len(dr.ids(0)) != 5 || dr.complete[0].CachedTokens != 40 {
		t.Fatalf("decode leg: %v %v, want 5 tokens with all 40 prompt tokens cached", dr.err, dr.complete)
	}
	if ps, ds := prefill.Workers()[0].PDStats(), decode.Workers()[0].PDStats(); ps.OK != 1 || ds.OK != 1 {
		t.Fatalf("handovers: prefill %+v decode %+v", ps, ds)
	}
	// A room no prefill serves: the decode's KV never comes.
	if r := sglGenerate(t.Context(), d, leg(8, promptIDs(40), 5)); status.Code(r.err) != codes.Internal || !strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("decode without its prefill: %v, want INTERNAL naming the timeout", r.err)
	}
	// Another prompt on the prefill than on the decode: the mismatch is the decode's error.
	go func() { pr <- sglGenerate(t.Context(), p, leg(9, promptIDs(40), 5)) }()
	if r := sglGenerate(t.Context(), d, leg(9, promptIDs(41), 5)); status.Code(r.err) != codes.Internal || !strings.Contains(r.err.Error(), "mismatch") {
		t.Fatalf("mispaired legs: %v, want INTERNAL naming the mismatch", r.err)
	}
	<-pr
	// The PD fields are required and checked.
	for name, req := range map[string]*sglangpb.GenerateRequest{
		"none": sglRequest("r", promptIDs(4), 1, false),
		"other host": func() *sglangpb.GenerateRequest {
			r := leg(10, promptIDs(4), 1)
			r.DisaggregatedParams.BootstrapHost = "10.1.1.1"
			return r
		}(),
	} {
		if r := sglGenerate(t.Context(), p, req); status.Code(r.err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, r.err)
		}
	}
	idle(t, prefill.Workers()[0])
	idle(t, decode.Workers()[0])
}

func TestGRPCPDVLLM(t *testing.T) {
	prefill, decode := grpcPDFleets(t, DialectVLLM)
	p := vllmpb.NewVllmEngineClient(dial(t, prefill, 0))
	d := vllmpb.NewVllmEngineClient(dial(t, decode, 0))
	gen := func(c vllmpb.VllmEngineClient, kv string, maxTokens uint32, stream bool) (*vllmpb.GenerateComplete, int, error) {
		sp := vllmpb.DefaultSamplingParams()
		sp.MaxTokens = &maxTokens
		req := &vllmpb.GenerateRequest{RequestId: "v", SamplingParams: sp, Stream: stream,
			Input: &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{InputIds: promptIDs(40)}}}
		if kv != "" {
			req.KvTransferParamsJson = &kv
		}
		st, err := c.Generate(t.Context(), req)
		if err != nil {
			return nil, 0, err
		}
		var end *vllmpb.GenerateComplete
		n := 0
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return end, n, nil
			}
			if err != nil {
				return nil, n, err
			}
			n += len(m.GetChunk().GetTokenIds())
			if e := m.GetComplete(); e != nil {
				end, n = e, n+len(e.OutputIds)
			}
		}
	}
	const ask = `{"do_remote_decode":true,"do_remote_prefill":false}`
	end, n, err := gen(p, ask, 1, false)
	if err != nil || n != 1 || end.GetKvTransferParamsJson() == "" {
		t.Fatalf("prefill leg: %v, %d tokens, kv_transfer_params %q", err, n, end.GetKvTransferParamsJson())
	}
	params := end.GetKvTransferParamsJson()
	end, n, err = gen(d, params, 6, true)
	if err != nil || n != 6 || end.CachedTokens != 40 {
		t.Fatalf("decode leg: %v, %d tokens, %v", err, n, end)
	}
	// Tampered block ids: the decode refuses the KV.
	var kv map[string]any
	if err := json.Unmarshal([]byte(params), &kv); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gen(p, ask, 1, false); err != nil {
		t.Fatal(err)
	}
	kv["remote_block_ids"] = []int{999}
	kv["remote_request_id"] = "mock-xfer-none"
	bad, _ := json.Marshal(kv)
	if _, _, err := gen(d, string(bad), 6, true); status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "kv_transfer_error") {
		t.Fatalf("decode with another transfer's params: %v, want INTERNAL kv_transfer_error", err)
	}
	// vLLM's prefill leg is one unstreamed token asking for a remote decode.
	for name, c := range map[string]struct {
		kv     string
		max    uint32
		stream bool
	}{
		"streamed":        {ask, 1, true},
		"two tokens":      {ask, 2, false},
		"no params":       {"", 1, false},
		"decode's params": {params, 1, false},
		"not JSON":        {"{", 1, false},
	} {
		if _, _, err := gen(p, c.kv, c.max, c.stream); status.Code(err) != codes.InvalidArgument {
			t.Errorf("prefill leg %s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	idle(t, prefill.Workers()[0])
	idle(t, decode.Workers()[0])
}
