package grpcworker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/engine/vllmpb"
	"github.com/smg-go/smg/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/structpb"
)

// Client is the gateway's client of one gRPC engine worker: a fixed pool of Config.Conns
// HTTP/2 connections and the dialect's generated stub on each. Safe for concurrent use.
type Client struct {
	addr    string
	dialect Dialect
	cfg     Config
	conns   []*grpc.ClientConn
	sg      []sglangpb.SglangSchedulerClient
	vl      []vllmpb.VllmEngineClient
	next    atomic.Uint32
	slots   chan struct{} // one token per open Generate stream
	closed  atomic.Bool

	// aborts tracks the Abort calls sent for canceled streams, which run on their own
	// goroutines; Close waits for them so none outlives the client.
	aborts sync.WaitGroup
	// abortMu orders aborts.Add against Close's Wait.
	abortMu sync.Mutex

	lastDialErr atomic.Pointer[error]
}

// Dial connects to the engine at target (host:port, see ParseWorkerURL) speaking dialect,
// and waits until every connection of the pool is ready, for at most cfg.DialTimeout or
// until ctx ends. A connection attempt that fails makes Dial fail at once with an error
// wrapping ErrConnect (class Unavailable), so a probe of a dead worker is quick. After Dial,
// lost connections reconnect on their own (backoff up to cfg.ReconnectMaxBackoff); calls
// made meanwhile fail with UNAVAILABLE instead of waiting.
func Dial(ctx context.Context, target string, dialect Dialect, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dialect != SGLang && dialect != VLLM {
		return nil, fmt.Errorf("cannot dial grpc://%s: unknown dialect %v; use SGLang or VLLM", target, dialect)
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("cannot dial %q: give host:port (ParseWorkerURL returns it): %w", target, err)
	}
	c := &Client{addr: target, dialect: dialect, cfg: cfg, slots: make(chan struct{}, cfg.MaxStreams)}
	dialer := &net.Dialer{}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			if err != nil {
				c.lastDialErr.Store(&err)
			}
			return conn, err
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxRecvMsgSize), grpc.MaxCallSendMsgSize(cfg.MaxSendMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.ReconnectMaxBackoff},
			MinConnectTimeout: cfg.DialTimeout,
		}),
		// The pool is this client's: no service config from DNS TXT records.
		grpc.WithDisableServiceConfig(),
		grpc.WithInitialWindowSize(cfg.StreamWindow),
		grpc.WithInitialConnWindowSize(cfg.ConnWindow),
	}
	for range cfg.Conns {
		// passthrough: the address is dialed as given; grpc-go's dns resolver would
		// otherwise spread one ClientConn over every A record, and the pool is per worker.
		cc, err := grpc.NewClient("passthrough:///"+target, opts...)
		if err != nil {
			c.closeConns()
			return nil, fmt.Errorf("%w grpc://%s: %v", ErrConnect, target, err)
		}
		c.conns = append(c.conns, cc)
		switch dialect {
		case SGLang:
			c.sg = append(c.sg, sglangpb.NewSglangSchedulerClient(cc))
		case VLLM:
			c.vl = append(c.vl, vllmpb.NewVllmEngineClient(cc))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	for _, cc := range c.conns {
		if err := c.waitReady(ctx, cc); err != nil {
			c.closeConns()
			return nil, err
		}
	}
	return c, nil
}

func (c *Client) waitReady(ctx context.Context, cc *grpc.ClientConn) error {
	cc.Connect()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			why := "the connection failed (connected, but no HTTP/2 gRPC server answered)"
			if p := c.lastDialErr.Load(); p != nil {
				why = (*p).Error()
			}
			return fmt.Errorf("%w grpc://%s: %s", ErrConnect, c.addr, why)
		}
		if !cc.WaitForStateChange(ctx, s) {
			return fmt.Errorf("%w grpc://%s: not ready within the dial timeout (%v, state %v): %w", ErrConnect, c.addr, c.cfg.DialTimeout, s, ctx.Err())
		}
	}
}

// Addr is the host:port the client dials.
func (c *Client) Addr() string { return c.addr }

// Dialect is the service the client speaks.
func (c *Client) Dialect() Dialect { return c.dialect }

// Close waits for the Abort calls of canceled streams still under way (each bounded by
// Config.AbortTimeout), then closes every connection: open streams end with an error of class
// Unavailable and later calls return ErrClosed. Idempotent.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.abortMu.Lock()
	c.abortMu.Unlock() // no aborts.Add after this: startAbort checks closed under abortMu
	c.aborts.Wait()
	return c.closeConns()
}

func (c *Client) closeConns() error {
	var errs []error
	for _, cc := range c.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pick returns the index of the next connection, round robin.
func (c *Client) pick() int {
	if len(c.conns) == 1 {
		return 0
	}
	return int(c.next.Add(1) % uint32(len(c.conns)))
}

func (c *Client) sglang() sglangpb.SglangSchedulerClient { return c.sg[c.pick()] }
func (c *Client) vllm() vllmpb.VllmEngineClient          { return c.vl[c.pick()] }

// HealthCheck calls the engine's HealthCheck: nil when it answers healthy, an error wrapping
// ErrUnhealthy with the engine's message when it answers unhealthy, the call's error else.
func (c *Client) HealthCheck(ctx context.Context) error {
	if c.closed.Load() {
		return ErrClosed
	}
	var healthy bool
	var msg string
	switch c.dialect {
	case SGLang:
		r, err := c.sglang().HealthCheck(ctx, &sglangpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		healthy, msg = r.GetHealthy(), r.GetMessage()
	default:
		r, err := c.vllm().HealthCheck(ctx, &vllmpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		healthy, msg = r.GetHealthy(), r.GetMessage()
	}
	if !healthy {
		return fmt.Errorf("%w: grpc://%s: %q", ErrUnhealthy, c.addr, msg)
	}
	return nil
}

// RankLoad is one data-parallel rank's load (the engines' SchedulerLoad).
type RankLoad struct {
	DPRank          int
	RunningRequests int
	WaitingRequests int
	TotalRequests   int
	// UsedTokens and MaxTotalTokens are KV-cache tokens in use and the cache's size.
	UsedTokens     int64
	MaxTotalTokens int64
	// TokenUsage is KV-cache usage in [0, 1].
	TokenUsage    float64
	GenThroughput float64
	CacheHitRate  float64
	Utilization   float64
	MaxRunning    int
	// WaitingTokens is the waiting queue's tokens the prefix cache does not cover; -1 when
	// the engine does not report it (vLLM's SchedulerLoad has no such field).
	WaitingTokens int64
}

// Loads is a GetLoads answer: every rank, and the worker's totals computed as the HTTP load
// monitor computes them from /v1/loads (loadmon.ParseLoads): requests, waiting tokens, KV
// capacity and throughput summed, KV usage the mean across ranks.
type Loads struct {
	Timestamp   string
	Version     string
	DPRankCount int
	Ranks       []RankLoad

	WaitingRequests  int
	RunningRequests  int
	WaitingTokens    int64 // -1 when no rank reports it
	TokenUsage       float64
	GenThroughput    float64
	KVCapacityTokens int64
}

// Rank returns rank r's load, for a worker registered as one DP rank (grpc://host:port@r).
func (l *Loads) Rank(r int) (RankLoad, bool) {
	for _, x := range l.Ranks {
		if x.DPRank == r {
			return x, true
		}
	}
	return RankLoad{}, false
}

// Report fills r's load fields (not At, which the caller stamps) from the totals, as
// loadmon.ParseLoads does from /v1/loads.
func (l *Loads) Report(r *worker.LoadReport) {
	*r = worker.LoadReport{At: r.At, WaitingTokens: l.WaitingTokens, WaitingRequests: l.WaitingRequests,
		RunningRequests: l.RunningRequests, TokenUsage: l.TokenUsage, GenThroughput: l.GenThroughput,
		KVCapacityTokens: l.KVCapacityTokens}
}

// Report fills r's load fields (not At) from this one rank.
func (x RankLoad) Report(r *worker.LoadReport) {
	*r = worker.LoadReport{At: r.At, WaitingTokens: x.WaitingTokens, WaitingRequests: x.WaitingRequests,
		RunningRequests: x.RunningRequests, TokenUsage: clamp01(x.TokenUsage), GenThroughput: max(x.GenThroughput, 0),
		KVCapacityTokens: x.MaxTotalTokens}
}

func (l *Loads) total() {
	l.WaitingTokens = -1
	var usage float64
	for _, x := range l.Ranks {
		l.WaitingRequests += x.WaitingRequests
		l.RunningRequests += x.RunningRequests
		if x.WaitingTokens >= 0 {
			l.WaitingTokens = max(l.WaitingTokens, 0) + x.WaitingTokens
		}
		usage += clamp01(x.TokenUsage)
		l.GenThroughput += max(x.GenThroughput, 0)
		l.KVCapacityTokens += x.MaxTotalTokens
	}
	if len(l.Ranks) > 0 {
		l.TokenUsage = usage / float64(len(l.Ranks))
	}
}

func clamp01(f float64) float64 {
	if !(f > 0) { // NaN too
		return 0
	}
	return min(f, 1)
}

func nonNeg(n int32) int { return int(max(n, 0)) }

// schedulerLoad is the per-rank load message of both engines' services (sglangpb and vllmpb
// SchedulerLoad): the same fields under the same names.
type schedulerLoad interface {
	GetDpRank() int32
	GetNumRunningReqs() int32
	GetNumWaitingReqs() int32
	GetNumTotalReqs() int32
	GetNumUsedTokens() int32
	GetMaxTotalNumTokens() int32
	GetTokenUsage() float64
	GetGenThroughput() float64
	GetCacheHitRate() float64
	GetUtilization() float64
	GetMaxRunningRequests() int32
}

// rankLoadOf reads one rank's load; waitingTokens is -1 when the engine does not report it.
func rankLoadOf(x schedulerLoad, waitingTokens int64) RankLoad {
	return RankLoad{DPRank: int(x.GetDpRank()), RunningRequests: nonNeg(x.GetNumRunningReqs()),
		WaitingRequests: nonNeg(x.GetNumWaitingReqs()), TotalRequests: nonNeg(x.GetNumTotalReqs()),
		UsedTokens: int64(nonNeg(x.GetNumUsedTokens())), MaxTotalTokens: int64(nonNeg(x.GetMaxTotalNumTokens())),
		TokenUsage: x.GetTokenUsage(), GenThroughput: x.GetGenThroughput(), CacheHitRate: x.GetCacheHitRate(),
		Utilization: x.GetUtilization(), MaxRunning: nonNeg(x.GetMaxRunningRequests()), WaitingTokens: waitingTokens}
}

// GetLoads asks the engine for every rank's load (its default sections).
func (c *Client) GetLoads(ctx context.Context) (Loads, error) {
	if c.closed.Load() {
		return Loads{}, ErrClosed
	}
	var l Loads
	switch c.dialect {
	case SGLang:
		r, err := c.sglang().GetLoads(ctx, &sglangpb.GetLoadsRequest{})
		if err != nil {
			return Loads{}, err
		}
		l = Loads{Timestamp: r.GetTimestamp(), Version: r.GetVersion(), DPRankCount: int(r.GetDpRankCount())}
		for _, x := range r.GetLoads() {
			// A proto3 int32 cannot say "not reported": SGLang always sends the count.
			l.Ranks = append(l.Ranks, rankLoadOf(x, int64(nonNeg(x.GetNumWaitingUncachedTokens()))))
		}
	default:
		r, err := c.vllm().GetLoads(ctx, &vllmpb.GetLoadsRequest{})
		if err != nil {
			return Loads{}, err
		}
		l = Loads{Timestamp: r.GetTimestamp(), Version: r.GetVersion(), DPRankCount: int(r.GetDpRankCount())}
		for _, x := range r.GetLoads() {
			l.Ranks = append(l.Ranks, rankLoadOf(x, -1)) // vLLM's SchedulerLoad has no waiting tokens
		}
	}
	l.total()
	return l, nil
}

// ModelInfo is what the gateway needs of the served model.
type ModelInfo struct {
	// ModelID is the name clients route by: served_model_name, else model_path.
	ModelID       string
	ModelPath     string
	TokenizerPath string
	// EOSTokenIDs end generation unless ignore_eos is set.
	EOSTokenIDs []uint32
	// MaxContextLength is the model's context length; MaxReqInputLen the longest prompt the
	// engine accepts (0 when not reported).
	MaxContextLength int
	MaxReqInputLen   int
	VocabSize        int
	PadTokenID       int
	BOSTokenID       int
	IsGeneration     bool
	SupportsVision   bool
	ModelType        string
	Architectures    []string
	// DefaultSamplingParamsJSON is the model's own sampling defaults, a JSON object or "".
	DefaultSamplingParamsJSON string
}

func eosIDs(ids []int32) []uint32 {
	out := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if id >= 0 {
			out = append(out, uint32(id))
		}
	}
	return out
}

// modelInfo is the GetModelInfo answer of both engines' services (sglangpb and vllmpb
// GetModelInfoResponse): the same fields under the same names, the two lengths signed (N
// int32) in SGLang's and unsigned (uint32) in vLLM's.
type modelInfo[N int32 | uint32] interface {
	GetServedModelName() string
	GetModelPath() string
	GetTokenizerPath() string
	GetEosTokenIds() []int32
	GetMaxContextLength() N
	GetMaxReqInputLen() int32
	GetVocabSize() N
	GetPadTokenId() int32
	GetBosTokenId() int32
	GetIsGeneration() bool
	GetSupportsVision() bool
	GetModelType() string
	GetArchitectures() []string
	GetDefaultSamplingParamsJson() string
}

// modelInfoOf reads either engine's GetModelInfo answer; ModelID falls back to the model
// path when the engine reports no served name.
func modelInfoOf[N int32 | uint32](r modelInfo[N]) ModelInfo {
	m := ModelInfo{ModelID: r.GetServedModelName(), ModelPath: r.GetModelPath(), TokenizerPath: r.GetTokenizerPath(),
		EOSTokenIDs: eosIDs(r.GetEosTokenIds()), MaxContextLength: max(int(r.GetMaxContextLength()), 0),
		MaxReqInputLen: nonNeg(r.GetMaxReqInputLen()), VocabSize: max(int(r.GetVocabSize()), 0),
		PadTokenID: int(r.GetPadTokenId()), BOSTokenID: int(r.GetBosTokenId()), IsGeneration: r.GetIsGeneration(),
		SupportsVision: r.GetSupportsVision(), ModelType: r.GetModelType(), Architectures: r.GetArchitectures(),
		DefaultSamplingParamsJSON: r.GetDefaultSamplingParamsJson()}
	if m.ModelID == "" {
		m.ModelID = m.ModelPath
	}
	return m
}

// GetModelInfo asks the engine what it serves.
func (c *Client) GetModelInfo(ctx context.Context) (ModelInfo, error) {
	if c.closed.Load() {
		return ModelInfo{}, ErrClosed
	}
	if c.dialect == SGLang {
		r, err := c.sglang().GetModelInfo(ctx, &sglangpb.GetModelInfoRequest{})
		if err != nil {
			return ModelInfo{}, err
		}
		return modelInfoOf(r), nil
	}
	r, err := c.vllm().GetModelInfo(ctx, &vllmpb.GetModelInfoRequest{})
	if err != nil {
		return ModelInfo{}, err
	}
	return modelInfoOf(r), nil
}

// ServerInfo is the engine's GetServerInfo answer; fields the dialect does not report are
// zero.
type ServerInfo struct {
	ActiveRequests       int
	IsPaused             bool
	LastReceiveTimestamp float64
	UptimeSeconds        float64
	// ServerType is "grpc" (SGLang) or "vllm-grpc".
	ServerType string
	// Version is SGLang's version; vLLM does not send one.
	Version           string
	MaxTotalNumTokens int // SGLang
	DataParallelSize  int // vLLM; 1 without data parallelism
	KVConnector       string
	KVRole            string
	// ServerArgs and SchedulerInfo are SGLang's JSON objects, nil for vLLM.
	ServerArgs    map[string]any
	SchedulerInfo map[string]any
}

// GetServerInfo asks the engine about itself.
func (c *Client) GetServerInfo(ctx context.Context) (ServerInfo, error) {
	if c.closed.Load() {
		return ServerInfo{}, ErrClosed
	}
	switch c.dialect {
	case SGLang:
		r, err := c.sglang().GetServerInfo(ctx, &sglangpb.GetServerInfoRequest{})
		if err != nil {
			return ServerInfo{}, err
		}
		return ServerInfo{ActiveRequests: nonNeg(r.GetActiveRequests()), IsPaused: r.GetIsPaused(),
			LastReceiveTimestamp: r.GetLastReceiveTimestamp(), UptimeSeconds: r.GetUptimeSeconds(),
			ServerType: r.GetServerType(), Version: r.GetSglangVersion(), MaxTotalNumTokens: nonNeg(r.GetMaxTotalNumTokens()),
			DataParallelSize: 1, ServerArgs: structMap(r.GetServerArgs()), SchedulerInfo: structMap(r.GetSchedulerInfo())}, nil
	default:
		r, err := c.vllm().GetServerInfo(ctx, &vllmpb.GetServerInfoRequest{})
		if err != nil {
			return ServerInfo{}, err
		}
		return ServerInfo{ActiveRequests: int(r.GetActiveRequests()), IsPaused: r.GetIsPaused(),
			LastReceiveTimestamp: r.GetLastReceiveTimestamp(), UptimeSeconds: r.GetUptimeSeconds(),
			ServerType: r.GetServerType(), DataParallelSize: max(nonNeg(r.GetDataParallelSize()), 1),
			KVConnector: r.GetKvConnector(), KVRole: r.GetKvRole()}, nil
	}
}

func structMap(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}

// FlushCache asks SGLang to drop its prefix cache, letting the scheduler drain for up to
// timeout first (0 flushes at once, and fails while requests run). An engine that answers success=false (SGLang refuses while
// requests run) gives an error carrying its message, class Internal. vLLM's service has no
// FlushCache: ErrUnsupported, class Unsupported, without a call.
func (c *Client) FlushCache(ctx context.Context, timeout time.Duration) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.dialect != SGLang {
		return fmt.Errorf("cannot flush the cache of grpc://%s: vLLM's gRPC service has no FlushCache: %w", c.addr, ErrUnsupported)
	}
	r, err := c.sglang().FlushCache(ctx, &commonpb.FlushCacheRequest{TimeoutS: float32(timeout.Seconds())})
	if err != nil {
		return err
	}
	if !r.GetSuccess() {
		return fmt.Errorf("cannot flush the cache of grpc://%s: the engine says %q", c.addr, r.GetMessage())
	}
	return nil
}

// Abort asks the engine to stop the requests with these ids. SGLang takes one id per call
// (sent one after another, the first error returned after trying all); vLLM takes them in one
// call. An id the engine does not know is not an error: the request may have just finished.
func (c *Client) Abort(ctx context.Context, ids ...string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	return c.abort(ctx, "", ids...)
}

func (c *Client) abort(ctx context.Context, reason string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if c.dialect == SGLang {
		var first error
		for _, id := range ids {
			if _, err := c.sglang().Abort(ctx, &sglangpb.AbortRequest{RequestId: id, Reason: reason}); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	_, err := c.vllm().Abort(ctx, &vllmpb.AbortRequest{RequestIds: ids})
	return err
}
