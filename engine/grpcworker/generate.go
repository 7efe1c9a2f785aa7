package grpcworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Opt is an optional value: Set says whether the caller gave it. An unset field is sent as
// the engine's own default (sglangpb/vllmpb DefaultSamplingParams), never as proto3's zero.
type Opt[T any] struct {
	Value T
	Set   bool
}

// Some returns a set Opt.
func Some[T any](v T) Opt[T] { return Opt[T]{Value: v, Set: true} }

// ConstraintKind is the kind of constrained decoding.
type ConstraintKind uint8

// The constraints. JSONObject is any JSON object: vLLM's json_object, for SGLang the schema
// {"type":"object"}.
const (
	NoConstraint ConstraintKind = iota
	JSONSchema
	Regex
	Grammar // EBNF: SGLang's ebnf_grammar, vLLM's grammar
	StructuralTag
	JSONObject
)

// Sampling holds the sampling parameters a client may set. The zero value is every engine
// default.
type Sampling struct {
	Temperature Opt[float32]
	TopP        Opt[float32]
	// TopK of 0 or less is the whole vocabulary (SGLang's -1, vLLM's 0).
	TopK              Opt[int32]
	MinP              Opt[float32]
	FrequencyPenalty  Opt[float32]
	PresencePenalty   Opt[float32]
	RepetitionPenalty Opt[float32]
	// MaxNewTokens unset runs to the context length.
	MaxNewTokens Opt[uint32]
	MinNewTokens uint32
	// Seed is vLLM's; SGLang's gRPC SamplingParams has no seed and it is not sent there.
	Seed         Opt[int32]
	Stop         []string
	StopTokenIDs []uint32
	IgnoreEOS    bool
	// N is the number of samples; 0 is 1, at most MaxSamples.
	N uint32
	// Constraint and ConstraintValue (the schema, regex, grammar or tag; unused for
	// JSONObject) are the constrained output.
	Constraint      ConstraintKind
	ConstraintValue string
}

// MaxSamples bounds Sampling.N: the stream keeps a flag per sample, and no engine serves
// more in one request.
const MaxSamples = 1024

// GenerateRequest is one generation, dialect-neutral. The client reads it during Generate
// only; the caller may reuse it when Generate returns.
type GenerateRequest struct {
	// RequestID names the request to the engine and to Abort; required and unique among the
	// worker's requests in flight.
	RequestID string
	// InputIDs is the tokenized prompt; required.
	InputIDs []uint32
	// Text is the prompt's text, informational only (the engines run InputIDs).
	Text     string
	Sampling Sampling
	// Stream asks for chunks as tokens are generated; without it only the final chunk of each
	// sample comes.
	Stream bool
	// DataParallelRank pins the request to one DP rank (grpc://host:port@RANK workers).
	DataParallelRank Opt[int32]
	// Bootstrap is SGLang's prefill-decode bootstrap (disaggregated_params).
	Bootstrap Opt[Bootstrap]
	// KVTransferParamsJSON is vLLM's KV connector parameters, a JSON object; "" for none.
	KVTransferParamsJSON string
	// TraceParent, when set, is sent as the call's W3C traceparent metadata: the engine's
	// spans join the gateway's trace with the gateway's span as their parent.
	TraceParent string
}

// Bootstrap is the prefill leg's bootstrap server for SGLang's prefill-decode disaggregation.
type Bootstrap struct {
	Host string
	Port int32
	Room int32
}

// MatchedStopKind says what ended a sample with finish reason "stop".
type MatchedStopKind uint8

// The matched stops: none (EOS, length, abort), a stop token id, a stop string.
const (
	MatchedNone MatchedStopKind = iota
	MatchedTokenID
	MatchedString
)

// Chunk is one message of a Generate stream. It and every slice in it are lent: valid until
// the next Recv or Close, owned by the Stream (copy what must outlive that).
type Chunk struct {
	// Index is the sample (0 to n-1) the chunk belongs to.
	Index uint32
	// TokenIDs are the sample's tokens new since its previous chunk (empty on a final chunk).
	TokenIDs []uint32
	// Final marks the sample's GenerateComplete: FinishReason, MatchedStop and OutputIDs are
	// set only then.
	Final bool
	// FinishReason is "stop", "length" or "abort", as the engine sent it.
	FinishReason string
	// MatchedStop is the stop token id or string that ended the sample, if any.
	MatchedStop       MatchedStopKind
	MatchedTokenID    uint32
	MatchedStopString string
	// OutputIDs is GenerateComplete.output_ids as the engine sent it: for a request without
	// Stream, the whole output (no earlier chunk carried it).
	OutputIDs []uint32
	// Token counts, cumulative for the sample.
	PromptTokens     uint32
	CompletionTokens uint32
	CachedTokens     uint32
	ReasoningTokens  uint32 // SGLang only
	// KVTransferParamsJSON is vLLM's prefill leg's KV parameters for the decode leg (final
	// chunks only).
	KVTransferParamsJSON string
}

// Stream is one Generate call's answer. Recv and Close are for one goroutine (the one
// relaying the answer); Close may also be called from another goroutine to abandon it.
type Stream interface {
	// Recv returns the next chunk; io.EOF once every sample has completed. Any other error
	// ends the stream (Classify it). The chunk is valid until the next Recv or Close.
	Recv() (*Chunk, error)
	// Close ends the stream: if the engine may still be generating (not every sample
	// completed and the engine did not end the call with an error), an Abort for the request
	// id is sent, once. Always call it; idempotent.
	Close()
}

// Generate starts a generation. The stream ends when ctx ends: then, unless every sample had
// completed, the engine is sent exactly one Abort for the request id (on its own goroutine,
// bounded by Config.AbortTimeout), since the engines keep generating for a vanished caller.
// Fails at once with ErrStreamLimit when Config.MaxStreams streams are open.
func (c *Client) Generate(ctx context.Context, req *GenerateRequest) (Stream, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if req.RequestID == "" || len(req.InputIDs) == 0 {
		return nil, fmt.Errorf("%w: a request id and input token ids are required", ErrBadRequest)
	}
	if req.Sampling.N > MaxSamples {
		return nil, fmt.Errorf("%w: n is %d, at most %d", ErrBadRequest, req.Sampling.N, MaxSamples)
	}
	if req.Sampling.Constraint > JSONObject {
		return nil, fmt.Errorf("%w: unknown constraint kind %d", ErrBadRequest, req.Sampling.Constraint)
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %d streams open to grpc://%s", ErrStreamLimit, c.cfg.MaxStreams, c.addr)
	}
	s := &stream{c: c, parent: ctx, id: req.RequestID, remaining: int(max(req.Sampling.N, 1)), done: make([]bool, max(req.Sampling.N, 1))}
	if req.TraceParent != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", req.TraceParent)
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	var err error
	switch c.dialect {
	case SGLang:
		s.sg, err = c.sglang().Generate(sctx, sglangRequest(req), grpc.ForceCodecV2(genCodec{}))
	default:
		s.vl, err = c.vllm().Generate(sctx, vllmRequest(req), grpc.ForceCodecV2(genCodec{}))
	}
	if err != nil {
		// Not started: the engine has nothing to abort.
		s.state.Store(stateEnded)
		cancel()
		s.release()
		return nil, err
	}
	// The caller's ctx, not sctx: Close cancels sctx itself and aborts on its own.
	s.stopWatch = context.AfterFunc(ctx, s.abandon)
	return s, nil
}

const (
	stateRunning int32 = iota
	stateEnded         // every sample completed, or the engine ended the call
	stateAborted       // abandoned while running: Abort sent
)

type stream struct {
	c         *Client
	parent    context.Context
	id        string
	cancel    context.CancelFunc
	stopWatch func() bool
	sg        grpc.ServerStreamingClient[sglangpb.GenerateResponse]
	vl        grpc.ServerStreamingClient[vllmpb.GenerateResponse]
	sgMsg     sgRecv
	vlMsg     vlRecv
	chunk     Chunk
	remaining int
	done      []bool
	state     atomic.Int32
	once      sync.Once // releases the slot
	err       error     // sticky: Recv after the end repeats it
}

func (s *stream) release() {
	s.once.Do(func() { <-s.c.slots })
}

// end records that the engine has nothing left running for this request.
func (s *stream) end(err error) error {
	s.err = err
	s.state.CompareAndSwap(stateRunning, stateEnded)
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.cancel()
	s.release()
	return err
}

// abandon is called when the caller's context ends or on Close: abort if still running.
func (s *stream) abandon() {
	if !s.state.CompareAndSwap(stateRunning, stateAborted) {
		return
	}
	s.cancel()
	c := s.c
	c.abortMu.Lock()
	if c.closed.Load() {
		c.abortMu.Unlock()
		return // the connections are closing: the engine sees every stream reset
	}
	c.aborts.Add(1)
	c.abortMu.Unlock()
	go func() {
		defer c.aborts.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.AbortTimeout)
		defer cancel()
		_ = c.abort(ctx, "client disconnected", s.id) // best effort: the stream is gone either way
	}()
}

func (s *stream) Close() {
	s.abandon()
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.cancel()
	s.release()
}

func (s *stream) Recv() (*Chunk, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.state.Load() == stateAborted {
		err := s.parent.Err() // Canceled or DeadlineExceeded, as the caller's context says
		if err == nil {
			err = context.Canceled // Close was called
		}
		return nil, s.end(err)
	}
	var err error
	if s.sg != nil {
		err = s.sg.RecvMsg(&s.sgMsg)
	} else {
		err = s.vl.RecvMsg(&s.vlMsg)
	}
	if err == io.EOF {
		if s.remaining > 0 {
			return nil, s.end(fmt.Errorf("%w (%d of %d samples missing) from grpc://%s", ErrTruncated, s.remaining, len(s.done), s.c.addr))
		}
		return nil, s.end(io.EOF)
	}
	if err != nil {
		if s.c.closed.Load() {
			// grpc-go reports a closed ClientConn as CANCELED; the caller did not cancel.
			err = fmt.Errorf("%w: %v", ErrClosed, err)
		}
		if perr := s.parent.Err(); perr != nil && !errors.Is(err, perr) {
			// The caller's context decides the class: when its deadline passes, abandon (run
			// by the AfterFunc) may cancel the stream's context before the deadline reaches
			// it, and grpc-go then says CANCELED.
			err = fmt.Errorf("%w: %v", perr, err)
		}
		if c := Classify(err); s.parent.Err() != nil || c == Canceled || c == Timeout {
			// The caller's context ended (grpc-go may report it before the AfterFunc runs,
			// or the engine's server may time the call out on the deadline grpc-go sent
			// it first): the call is gone, but the engine's scheduler may still be
			// generating.
			s.abandon()
		}
		// Otherwise a status from the engine ended its request: nothing to abort.
		return nil, s.end(err)
	}
	if s.sg != nil {
		err = s.fromSGLang(&s.sgMsg)
	} else {
		err = s.fromVLLM(&s.vlMsg)
	}
	if err != nil {
		s.abandon() // the engine may still be running a request this client cannot follow
		return nil, s.end(err)
	}
	if s.chunk.Final {
		if s.done[s.chunk.Index] {
			s.abandon()
			return nil, s.end(fmt.Errorf("%w: sample %d completed twice", ErrBadResponse, s.chunk.Index))
		}
		s.done[s.chunk.Index] = true
		s.remaining--
		if s.remaining == 0 {
			// Nothing left to abort, whatever happens to ctx from now on.
			s.state.CompareAndSwap(stateRunning, stateEnded)
		}
	}
	return &s.chunk, nil
}

func (s *stream) checkIndex(i uint32) error {
	if int(i) >= len(s.done) {
		return fmt.Errorf("%w: sample index %d, but %d samples were asked for", ErrBadResponse, i, len(s.done))
	}
	return nil
}

// streamChunk is a plain chunk of both engines' Generate streams (sglangpb and vllmpb
// GenerateStreamChunk): the fields a Chunk reads, under the same names.
type streamChunk interface {
	GetIndex() uint32
	GetTokenIds() []uint32
	GetPromptTokens() uint32
	GetCompletionTokens() uint32
	GetCachedTokens() uint32
}

// streamComplete is the last message of both engines' Generate streams (sglangpb and vllmpb
// GenerateComplete): the fields a Chunk reads, under the same names.
type streamComplete interface {
	GetIndex() uint32
	GetFinishReason() string
	GetOutputIds() []uint32
	GetPromptTokens() uint32
	GetCompletionTokens() uint32
	GetCachedTokens() uint32
}

// fromRecv sets s.chunk to what both engines send of the message of this kind: fast, chunk
// or complete. The callers add their engine's own fields and check the index.
func (s *stream) fromRecv(kind uint8, fast *fastFields, chunk streamChunk, complete streamComplete) error {
	c := &s.chunk
	switch kind {
	case kindFast:
		// reasoning stays 0 for a dialect without the field (chunkFieldNums.reasoning 0).
		*c = Chunk{Index: fast.index, TokenIDs: fast.ids, PromptTokens: fast.prompt, CompletionTokens: fast.completion,
			CachedTokens: fast.cached, ReasoningTokens: fast.reasoning}
	case kindChunk:
		*c = Chunk{Index: chunk.GetIndex(), TokenIDs: chunk.GetTokenIds(), PromptTokens: chunk.GetPromptTokens(),
			CompletionTokens: chunk.GetCompletionTokens(), CachedTokens: chunk.GetCachedTokens()}
	case kindComplete:
		*c = Chunk{Index: complete.GetIndex(), Final: true, FinishReason: complete.GetFinishReason(),
			OutputIDs: complete.GetOutputIds(), PromptTokens: complete.GetPromptTokens(),
			CompletionTokens: complete.GetCompletionTokens(), CachedTokens: complete.GetCachedTokens()}
	default:
		*c = Chunk{}
		return fmt.Errorf("%w: a GenerateResponse with neither chunk nor complete", ErrBadResponse)
	}
	return nil
}

func (s *stream) fromSGLang(m *sgRecv) error {
	if err := s.fromRecv(m.kind, &m.fast, &m.chunk, &m.complete); err != nil {
		return err
	}
	c := &s.chunk
	switch m.kind {
	case kindChunk:
		c.ReasoningTokens = m.chunk.ReasoningTokens
	case kindComplete:
		c.ReasoningTokens = m.complete.ReasoningTokens
		switch ms := m.complete.MatchedStop.(type) {
		case *sglangpb.GenerateComplete_MatchedTokenId:
			c.MatchedStop, c.MatchedTokenID = MatchedTokenID, ms.MatchedTokenId
		case *sglangpb.GenerateComplete_MatchedStopStr:
			c.MatchedStop, c.MatchedStopString = MatchedString, ms.MatchedStopStr
		}
	}
	return s.checkIndex(c.Index)
}

func (s *stream) fromVLLM(m *vlRecv) error {
	if err := s.fromRecv(m.kind, &m.fast, &m.chunk, &m.complete); err != nil {
		return err
	}
	c := &s.chunk
	if m.kind == kindComplete {
		c.KVTransferParamsJSON = m.complete.GetKvTransferParamsJson()
		switch ms := m.complete.MatchedStop.(type) {
		case *vllmpb.GenerateComplete_MatchedTokenId:
			c.MatchedStop, c.MatchedTokenID = MatchedTokenID, ms.MatchedTokenId
		case *vllmpb.GenerateComplete_MatchedStopStr:
			c.MatchedStop, c.MatchedStopString = MatchedString, ms.MatchedStopStr
		}
	}
	return s.checkIndex(c.Index)
}

// sglangRequest maps req onto SGLang's GenerateRequest, starting from SGLang's defaults.
func sglangRequest(req *GenerateRequest) *sglangpb.GenerateRequest {
	sp := sglangpb.DefaultSamplingParams()
	q := &req.Sampling
	setF(&sp.Temperature, q.Temperature)
	setF(&sp.TopP, q.TopP)
	setF(&sp.MinP, q.MinP)
	setF(&sp.FrequencyPenalty, q.FrequencyPenalty)
	setF(&sp.PresencePenalty, q.PresencePenalty)
	setF(&sp.RepetitionPenalty, q.RepetitionPenalty)
	if q.TopK.Set {
		sp.TopK = q.TopK.Value
		if sp.TopK <= 0 {
			sp.TopK = -1
		}
	}
	if q.MaxNewTokens.Set {
		v := q.MaxNewTokens.Value
		sp.MaxNewTokens = &v
	}
	sp.MinNewTokens = q.MinNewTokens
	sp.Stop = q.Stop
	sp.StopTokenIds = q.StopTokenIDs
	sp.IgnoreEos = q.IgnoreEOS
	sp.N = max(q.N, 1)
	// The gateway detokenizes with the client's skip_special_tokens; the engine's own
	// detokenization (stop strings) must see every token the gateway will.
	sp.SkipSpecialTokens = false
	switch q.Constraint {
	case JSONSchema:
		sp.Constraint = &sglangpb.SamplingParams_JsonSchema{JsonSchema: q.ConstraintValue}
	case JSONObject:
		sp.Constraint = &sglangpb.SamplingParams_JsonSchema{JsonSchema: `{"type":"object"}`}
	case Regex:
		sp.Constraint = &sglangpb.SamplingParams_Regex{Regex: q.ConstraintValue}
	case Grammar:
		sp.Constraint = &sglangpb.SamplingParams_EbnfGrammar{EbnfGrammar: q.ConstraintValue}
	case StructuralTag:
		sp.Constraint = &sglangpb.SamplingParams_StructuralTag{StructuralTag: q.ConstraintValue}
	}
	r := &sglangpb.GenerateRequest{
		RequestId:      req.RequestID,
		Tokenized:      &sglangpb.TokenizedInput{OriginalText: req.Text, InputIds: req.InputIDs},
		SamplingParams: sp,
		Stream:         req.Stream,
		// -1: no prompt logprobs (0 would ask for the whole prompt's).
		LogprobStartLen: -1,
	}
	// SGLang's data_parallel_rank is a plain int32: unset goes as 0, as from every SGLang
	// client (the engine cannot tell rank 0 from no rank; -1 is not a documented "none").
	r.DataParallelRank = req.DataParallelRank.Value
	if req.Bootstrap.Set {
		b := req.Bootstrap.Value
		r.DisaggregatedParams = &sglangpb.DisaggregatedParams{BootstrapHost: b.Host, BootstrapPort: b.Port, BootstrapRoom: b.Room}
	}
	return r
}

// vllmRequest maps req onto vLLM's GenerateRequest, starting from vLLM's defaults.
func vllmRequest(req *GenerateRequest) *vllmpb.GenerateRequest {
	sp := vllmpb.DefaultSamplingParams()
	q := &req.Sampling
	if q.Temperature.Set {
		v := q.Temperature.Value
		sp.Temperature = &v
	}
	setF(&sp.TopP, q.TopP)
	setF(&sp.MinP, q.MinP)
	setF(&sp.FrequencyPenalty, q.FrequencyPenalty)
	setF(&sp.PresencePenalty, q.PresencePenalty)
	setF(&sp.RepetitionPenalty, q.RepetitionPenalty)
	if q.TopK.Set {
		sp.TopK = uint32(max(q.TopK.Value, 0))
	}
	if q.MaxNewTokens.Set {
		v := q.MaxNewTokens.Value
		sp.MaxTokens = &v
	}
	if q.Seed.Set {
		v := q.Seed.Value
		sp.Seed = &v
	}
	sp.MinTokens = q.MinNewTokens
	sp.Stop = q.Stop
	sp.StopTokenIds = q.StopTokenIDs
	sp.IgnoreEos = q.IgnoreEOS
	sp.N = max(q.N, 1)
	sp.SkipSpecialTokens = false // as for SGLang: the gateway detokenizes
	switch q.Constraint {
	case JSONSchema:
		sp.Constraint = &vllmpb.SamplingParams_JsonSchema{JsonSchema: q.ConstraintValue}
	case JSONObject:
		sp.Constraint = &vllmpb.SamplingParams_JsonObject{JsonObject: true}
	case Regex:
		sp.Constraint = &vllmpb.SamplingParams_Regex{Regex: q.ConstraintValue}
	case Grammar:
		sp.Constraint = &vllmpb.SamplingParams_Grammar{Grammar: q.ConstraintValue}
	case StructuralTag:
		sp.Constraint = &vllmpb.SamplingParams_StructuralTag{StructuralTag: q.ConstraintValue}
	}
	r := &vllmpb.GenerateRequest{
		RequestId:      req.RequestID,
		Input:          &vllmpb.GenerateRequest_Tokenized{Tokenized: &vllmpb.TokenizedInput{OriginalText: req.Text, InputIds: req.InputIDs}},
		SamplingParams: sp,
		Stream:         req.Stream,
	}
	if req.DataParallelRank.Set {
		v := req.DataParallelRank.Value
		r.DataParallelRank = &v
	}
	if req.KVTransferParamsJSON != "" {
		v := req.KVTransferParamsJSON
		r.KvTransferParamsJson = &v
	}
	return r
}

func setF(dst *float32, o Opt[float32]) {
	if o.Set {
		*dst = o.Value
	}
}
