package fastpath

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/breaker"
)

// PD mode over gRPC workers (--pd-disaggregation with grpc:// prefill and decode workers).
// SGLang's handover: both legs get the same request with the prefill worker's bootstrap
// address and a fresh room (disaggregated_params); the prefill leg's answer is drained and
// the decode leg's relayed. vLLM's (a prefill worker with a KV connector label): the prefill
// leg runs one token with kv_transfer_params asking for a remote decode, and the decode leg
// carries the kv_transfer_params of its answer. A client that leaves aborts both legs; a
// failed decode leg aborts the prefill leg. PD requests are not retried.

// defaultBootstrapPort is SGLang's --disaggregation-bootstrap-port default, for a prefill
// worker registered without the bootstrap-port label.
const defaultBootstrapPort = 8998

// vllmPrefillParams asks a vLLM prefill engine to keep the KV for a remote decode.
const vllmPrefillParams = `{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}`

var errNoPrefillKV = errors.New("the prefill engine's answer has no kv_transfer_params: is it a vLLM engine started with --kv-transfer-config (kv_role kv_producer or kv_both)?")

// relayPD picks a prefill and decode pair and runs its handover (PD requests are not
// retried).
func (g *grpcCall) relayPD() {
	le := g.le
	a := &le.attempt
	if le.pd.prt == nil || le.rt == nil {
		g.fail(errNoWorkers, "model '"+g.req.Model+"' needs a prefill and a decode worker in PD mode")
		return
	}
	if err := a.pick(le.pd.prt, &a.prefill); err != nil {
		g.failPick(err)
		return
	}
	if err := a.pick(le.rt, &a.main); err != nil {
		g.failPick(err)
		return
	}
	pw, dw := a.prefill.w, a.main.w
	ctx, cancel := g.callContext() // the client leaving ends both legs' calls
	defer cancel()
	b := g.le.s.cfg.GRPC
	pc, err := b.Client(pw)
	if err != nil {
		a.prefill.end(breaker.Fault, worker.OutcomeError)
		g.fail(errUpstreamUnreachable, "prefill worker "+pw.URL+": "+err.Error())
		return
	}
	rank := -1
	if b.DPRank != nil {
		rank = b.DPRank(pw)
	}
	g.req.Fill(&g.greq, g.rid, g.ids, rank)
	g.greq.TraceParent = le.trace.headerString()
	if pw.KVConnector != "" {
		g.relayVLLMPD(ctx, pc, pw, dw)
		return
	}
	g.relaySGLangPD(ctx, pc, pw, dw)
}

// relayVLLMPD runs vLLM's handover on the picked pair: the prefill leg (pc, on pw) to its
// end, then the decode leg on dw with the kv_transfer_params of its answer.
func (g *grpcCall) relayVLLMPD(ctx context.Context, pc *grpcworker.Client, pw, dw *worker.Worker) {
	a := &g.le.attempt
	g.greq.Sampling.MaxNewTokens, g.greq.Sampling.N, g.greq.Sampling.Stop, g.greq.Sampling.StopTokenIDs = grpcworker.Some[uint32](1), 1, nil, nil
	// One token, not streamed, as vLLM's own PD proxy sends it (the decode leg is filled
	// afresh from the client's request).
	g.greq.Stream = false
	g.greq.KVTransferParamsJSON = vllmPrefillParams
	a.dispatch(&a.prefill)
	params, err := runPrefill(ctx, pc, &g.greq)
	settleLeg(&a.prefill, err)
	if err != nil {
		g.failPrefill(ctx, pw, err)
		return
	}
	g.kvParams = params
	g.failDecode(ctx, dw, g.try(ctx, dw))
}

// relaySGLangPD runs SGLang's handover on the picked pair: both legs at once with the prefill
// worker's bootstrap address, the prefill leg (pc, on pw) drained, the decode leg (dw)
// relayed.
func (g *grpcCall) relaySGLangPD(ctx context.Context, pc *grpcworker.Client, pw, dw *worker.Worker) {
	a := &g.le.attempt
	port := pw.BootstrapPort
	if port == 0 {
		port = defaultBootstrapPort
	}
	g.bootstrap = grpcworker.Some(grpcworker.Bootstrap{Host: pw.BootstrapHost, Port: int32(port), Room: rand.Int32()})
	g.greq.Bootstrap = g.bootstrap
	a.dispatch(&a.prefill)
	pctx, pcancel := context.WithCancel(ctx)
	ps, err := pc.Generate(pctx, &g.greq)
	if err != nil {
		pcancel()
		settleLeg(&a.prefill, err)
		g.failPrefill(ctx, pw, err)
		return
	}
	// The prefill leg's answer says nothing the client needs: drained on its own
	// goroutine, which owns the leg from here on.
	pl := a.take(&a.prefill)
	done := make(chan struct{})
	go func() {
		defer close(done)
		settleLeg(&pl, drain(ps))
	}()
	defer func() { <-done }() // after pcancel below, when the decode leg failed
	defer pcancel()
	derr := g.try(ctx, dw)
	if derr == nil {
		<-done // the prefill leg ends by itself (the request's deadline bounds it)
		return
	}
	pcancel() // a failed decode leg takes its prefill leg with it
	g.failDecode(ctx, dw, derr)
}

// failPrefill answers the prefill leg's failure err on pw, unless the call ended first (the
// client left, the deadline passed).
func (g *grpcCall) failPrefill(ctx context.Context, pw *worker.Worker, err error) {
	if !g.leftOrDeadline(ctx) {
		c := grpcworker.Classify(err)
		g.fail(grpcError(c), "prefill worker "+pw.URL+": "+grpcworker.Message(err))
	}
}

// failDecode answers the decode leg's failure derr on dw (nil: none), unless the client saw
// the answer start or the call ended first.
func (g *grpcCall) failDecode(ctx context.Context, dw *worker.Worker, derr error) {
	if derr != nil && !g.started && !g.leftOrDeadline(ctx) {
		c := grpcworker.Classify(derr)
		g.fail(grpcError(c), "decode worker "+dw.URL+": "+grpcworker.Message(derr))
	}
}

// runPrefill runs vLLM's prefill leg to its end and returns the kv_transfer_params of its
// answer.
func runPrefill(ctx context.Context, c *grpcworker.Client, req *grpcworker.GenerateRequest) (string, error) {
	st, err := c.Generate(ctx, req)
	if err != nil {
		return "", err
	}
	defer st.Close()
	var params string
	for {
		ch, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		if ch.Final && ch.KVTransferParamsJSON != "" {
			params = strings.Clone(ch.KVTransferParamsJSON) // the chunk is lent until the next Recv
		}
	}
	if params == "" {
		return "", errNoPrefillKV
	}
	return params, nil
}

// drain reads a stream to its end: nil when it ended whole.
func drain(st grpcworker.Stream) error {
	defer st.Close()
	for {
		if _, err := st.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}
