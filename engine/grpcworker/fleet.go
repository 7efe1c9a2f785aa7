package grpcworker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/worker"
)

// Fleet holds one engine client per gRPC engine and service (a DP engine's ranks share
// it), dialled on first use and closed when no registered worker names its engine any more.
type Fleet struct {
	cfg Config

	mu      sync.Mutex
	clients map[engineKey]*Client
	// detected is the service an engine registered without a runtime_type was found to serve.
	detected map[string]Dialect
	// described holds the engines whose GetModelInfo was handed to describe.
	described map[string]bool
	closed    bool

	// describe receives each engine's model description once, with the worker whose probe
	// asked, before the engine is first reported healthy (nil: not asked); an error leaves
	// the engine unhealthy until a later probe describes it.
	describe func(context.Context, *Client, *worker.Worker, ModelInfo) error
}

type engineKey struct {
	target  string // host:port
	dialect Dialect
}

func NewFleet(cfg Config) *Fleet {
	return &Fleet{cfg: cfg, clients: map[engineKey]*Client{}, detected: map[string]Dialect{}, described: map[string]bool{}}
}

// SetDescribe sets the function that receives each engine's model description
// (GetModelInfo) once, with the worker whose probe asked, before the engine is first
// reported healthy; an error it returns leaves the engine unhealthy until a later probe
// describes it. nil: not asked.
func (e *Fleet) SetDescribe(fn func(context.Context, *Client, *worker.Worker, ModelInfo) error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.describe = fn
}

// Client returns w's engine client, dialling it the first time. The service is the one w's
// runtime_type names (sglang, vllm); without one, SGLang's unless the engine answers that
// it does not serve it, then vLLM's.
func (e *Fleet) Client(w *worker.Worker) (*Client, error) {
	target := w.GRPCTarget()
	switch w.Spec().RuntimeType {
	case "vllm":
		return e.clientFor(engineKey{target, VLLM})
	case "sglang":
		return e.clientFor(engineKey{target, SGLang})
	}
	e.mu.Lock()
	d, ok := e.detected[target]
	e.mu.Unlock()
	if ok {
		return e.clientFor(engineKey{target, d})
	}
	c, err := e.clientFor(engineKey{target, SGLang})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	err = c.HealthCheck(ctx)
	switch {
	case status.Code(err) == codes.Unimplemented:
		d = VLLM
	case err == nil || errors.Is(err, ErrUnhealthy):
		d = SGLang
	default:
		return c, nil // not known yet: asked again next time
	}
	e.mu.Lock()
	e.detected[target] = d
	e.mu.Unlock()
	return e.clientFor(engineKey{target, d})
}

func (e *Fleet) clientFor(k engineKey) (*Client, error) {
	e.mu.Lock()
	c, closed := e.clients[k], e.closed
	e.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	c, err := Dial(ctx, k.target, k.dialect, e.cfg)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = c.Close()
		return nil, ErrClosed
	}
	if old := e.clients[k]; old != nil { // another caller dialled it meanwhile
		_ = c.Close()
		return old, nil
	}
	e.clients[k] = c
	return c, nil
}

// Sync closes the clients of engines no worker of snap names. It runs after every registry
// publication: with no client open (a fleet of HTTP workers) it returns without walking the
// workers.
func (e *Fleet) Sync(snap *worker.Snapshot) {
	e.mu.Lock()
	none := len(e.clients) == 0
	e.mu.Unlock()
	if none {
		return
	}
	live := map[string]bool{}
	for _, w := range snap.Workers {
		if t := w.GRPCTarget(); t != "" {
			live[t] = true
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, c := range e.clients {
		if !live[k.target] {
			_ = c.Close()
			delete(e.clients, k)
			delete(e.detected, k.target)
			delete(e.described, k.target)
		}
	}
}

func (e *Fleet) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	var errs []error
	for k, c := range e.clients {
		errs = append(errs, c.Close())
		delete(e.clients, k)
	}
	return errors.Join(errs...)
}

// Probe is the health checker's probe of a gRPC worker: the engine's HealthCheck RPC. The
// first success also asks the engine's GetModelInfo for describe, and counts only once that
// answered: a worker turns ready with its model's limits known.
func (e *Fleet) Probe(ctx context.Context, w *worker.Worker) error {
	c, err := e.Client(w)
	if err != nil {
		return err
	}
	if err := c.HealthCheck(ctx); err != nil {
		return err
	}
	target := w.GRPCTarget()
	e.mu.Lock()
	done := e.describe == nil || e.described[target]
	e.mu.Unlock()
	if done {
		return nil
	}
	info, err := c.GetModelInfo(ctx)
	if err != nil {
		return fmt.Errorf("GetModelInfo: %w", err)
	}
	if err := e.describe(ctx, c, w, info); err != nil {
		return err
	}
	e.mu.Lock()
	e.described[target] = true
	e.mu.Unlock()
	return nil
}

// Loads is the load monitor's poll of a gRPC worker: GetLoads, the worker's own rank when it
// is one DP rank of the engine, else the engine's totals.
func (e *Fleet) Loads(ctx context.Context, w *worker.Worker) (*worker.LoadReport, error) {
	c, err := e.Client(w)
	if err != nil {
		return nil, err
	}
	l, err := c.GetLoads(ctx)
	if err != nil {
		return nil, err
	}
	r := new(worker.LoadReport)
	if rank := w.DPRank(); rank >= 0 {
		x, ok := l.Rank(rank)
		if !ok {
			return nil, fmt.Errorf("%s: the engine reports no load for data-parallel rank %d", w.URL, rank)
		}
		x.Report(r)
		return r, nil
	}
	l.Report(r)
	return r, nil
}

// ProbeAddress is discovery's gRPC probe of a pod's address: nil once the engine there
// answers HealthCheck healthy (SGLang's service, else vLLM's).
func (e *Fleet) ProbeAddress(ctx context.Context, hostPort string) error {
	var err error
	for _, d := range []Dialect{SGLang, VLLM} {
		var c *Client
		if c, err = e.clientFor(engineKey{hostPort, d}); err != nil {
			return err
		}
		if err = c.HealthCheck(ctx); status.Code(err) != codes.Unimplemented {
			return err
		}
	}
	return err
}

// Admin answers an admin route of a gRPC worker from its engine's gRPC service.
func (e *Fleet) Admin(ctx context.Context, w *worker.Worker, method, path string) (int, []byte, string, error) {
	c, err := e.Client(w)
	if err != nil {
		return 0, nil, "", err
	}
	return c.AdminCall(ctx, w.DPRank(), method, path)
}

// DiscoverModels wraps the HTTP model discoverer: a grpc:// worker's model is its engine's
// GetModelInfo model id (SGLang's service first, then vLLM's).
func (e *Fleet) DiscoverModels(http func(ctx context.Context, url, apiKey string) ([]string, error)) func(ctx context.Context, url, apiKey string) ([]string, error) {
	return func(ctx context.Context, url, apiKey string) ([]string, error) {
		if !strings.HasPrefix(url, "grpc://") {
			return http(ctx, url, apiKey)
		}
		target, _, _ := strings.Cut(strings.TrimPrefix(url, "grpc://"), "@")
		var last error
		for _, d := range []Dialect{SGLang, VLLM} {
			c, err := e.clientFor(engineKey{target, d})
			if err != nil {
				return nil, err
			}
			info, err := c.GetModelInfo(ctx)
			if err == nil && info.ModelID != "" {
				return []string{info.ModelID}, nil
			}
			if err == nil {
				err = errors.New("the engine names no model")
			}
			last = err
			if status.Code(err) != codes.Unimplemented {
				break
			}
		}
		return nil, last
	}
}
