package mockworker

import (
	"context"

	"github.com/valyala/fastjson"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/sglangpb"
)

// Prefill-decode over the engines' gRPC services: the same roles, rendezvous and checks as
// the HTTP routes (pd.go), with the PD fields where each engine's proto carries them.
// SGLang: GenerateRequest.disaggregated_params (bootstrap host, port, room; both legs at
// once). vLLM: GenerateRequest.kv_transfer_params_json (the HTTP body's kv_transfer_params,
// as a JSON string), the prefill answering the decode's in GenerateComplete's.

// sglangPD reads a PD worker's disaggregated_params; nil on a unified worker.
func (w *Worker) sglangPD(req *sglangpb.GenerateRequest) (*pdState, error) {
	if w.cfg.Role == RoleUnified {
		return nil, nil
	}
	dp := req.GetDisaggregatedParams()
	if dp == nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s worker got a request without disaggregated_params: the gateway must send bootstrap_host, bootstrap_port and bootstrap_room", w.cfg.Role)
	}
	if dp.BootstrapHost == "" {
		return nil, status.Errorf(codes.InvalidArgument, "%s worker got disaggregated_params without bootstrap_host (the prefill worker's host)", w.cfg.Role)
	}
	if dp.BootstrapRoom < 0 || dp.BootstrapPort < 0 || dp.BootstrapPort > 65535 {
		return nil, status.Errorf(codes.InvalidArgument, "%s worker: bootstrap_room must be >= 0 and bootstrap_port in 0..65535 (0: the default), got %d and %d", w.cfg.Role, dp.BootstrapRoom, dp.BootstrapPort)
	}
	f := pdFields{host: dp.BootstrapHost, port: int(dp.BootstrapPort), room: uint64(dp.BootstrapRoom)}
	return w.rpcPDState(f, req.GetTokenized().GetOriginalText(), req.GetTokenized().GetInputIds(), req.GetStream(), int(req.GetSamplingParams().GetMaxNewTokens()))
}

// vllmPD reads a PD worker's kv_transfer_params_json; nil on a unified worker.
func (w *Worker) vllmPD(kvJSON *string, text string, ids []uint32, stream bool, maxTokens int) (*pdState, error) {
	if w.cfg.Role == RoleUnified {
		return nil, nil
	}
	var body *fastjson.Value
	if kvJSON != nil {
		kv, err := fastjson.Parse(*kvJSON)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "kv_transfer_params_json is not valid JSON: %v", err)
		}
		body = new(fastjson.Arena).NewObject()
		body.Set("kv_transfer_params", kv)
	} else {
		body = fastjson.MustParse(`{}`)
	}
	f, err := parsePDFields(body, DialectVLLM, w.cfg.Role)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return w.rpcPDState(f, text, ids, stream, maxTokens)
}

func (w *Worker) rpcPDState(f pdFields, text string, ids []uint32, stream bool, maxTokens int) (*pdState, error) {
	pd, err := w.newPDState(f, promptFingerprint([]byte(text), ids), max(len(ids), 1), stream, maxTokens)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return pd, nil
}

// startPD runs a PD request's part before it generates: a decode claims its KV (a failure is
// the engine's error for the request; the prompt then counts as computed), a prefill's key
// is checked free (instant mode publishes it now; the engine model publishes at the first
// token, publishingSender). It returns the sender to use.
func (w *Worker) startPD(ctx context.Context, req *rpcRequest, out rpcSender) (rpcSender, error) {
	pd := req.pd
	if pd.decode {
		res, err := w.fetchPD(pd, w.done, ctx.Done())
		switch res {
		case pdClosed:
			return nil, w.gone(ctx)
		case pdOK:
			return out, nil
		}
		return nil, status.Error(codes.Internal, "kv_transfer_error: "+err.Error())
	}
	if w.engine == nil {
		if err := w.pdf.rv.publish(pd.key, pd.rec); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: %v", pd.label, err)
		}
		w.countPD(pdOK)
		return out, nil
	}
	if w.pdf.rv.published(pd.key) {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", pd.label, errKeyInUse)
	}
	return &publishingSender{rpcSender: out, w: w, pd: pd}, nil
}

// publishingSender publishes a prefill's KV before the first message of its answer leaves
// (its prefill is done once it has a token).
type publishingSender struct {
	rpcSender
	w    *Worker
	pd   *pdState
	done bool
}

func (p *publishingSender) publish() {
	if p.done {
		return
	}
	p.done = true
	if err := p.w.pdf.rv.publish(p.pd.key, p.pd.rec); err != nil {
		p.w.countPD(pdRejected) // a twin published the key meanwhile; the decode will say so
		return
	}
	p.w.countPD(pdOK)
}

func (p *publishingSender) chunk(index int, id uint32, prompt, completion, cached int) error {
	p.publish()
	return p.rpcSender.chunk(index, id, prompt, completion, cached)
}

func (p *publishingSender) complete(index int, ids []uint32, plan genPlan, finish string, prompt, completion, cached int) error {
	if completion > 0 {
		p.publish()
	}
	return p.rpcSender.complete(index, ids, plan, finish, prompt, completion, cached)
}
