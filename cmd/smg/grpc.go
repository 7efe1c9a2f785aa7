package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/fastpath"
	"github.com/smg-go/smg/tokenizer"
	"github.com/smg-go/smg/tokenizer/chat"
	"github.com/smg-go/smg/worker"
)

// engines holds one engine client per gRPC engine and service (a DP engine's ranks share
// it), dialled on first use and closed when no registered worker names its engine any more.
type engines struct {
	cfg grpcworker.Config

	mu      sync.Mutex
	clients map[engineKey]*grpcworker.Client
	// detected is the service an engine registered without a runtime_type was found to serve.
	detected map[string]grpcworker.Dialect
	// described holds the engines whose GetModelInfo was handed to describe.
	described map[string]bool
	closed    bool

	// describe receives each engine's model description once, before the engine is first
	// reported healthy (nil: not asked); an error leaves the engine unhealthy until a later
	// probe describes it.
	describe func(context.Context, *grpcworker.Client, grpcworker.ModelInfo) error
}

type engineKey struct {
	target  string // host:port
	dialect grpcworker.Dialect
}

func newEngines() *engines {
	return &engines{cfg: grpcworker.DefaultConfig(), clients: map[engineKey]*grpcworker.Client{}, detected: map[string]grpcworker.Dialect{}, described: map[string]bool{}}
}

// client returns w's engine client, dialling it the first time. The service is the one w's
// runtime_type names (sglang, vllm); without one, SGLang's unless the engine answers that
// it does not serve it, then vLLM's.
func (e *engines) client(w *worker.Worker) (*grpcworker.Client, error) {
	target := w.GRPCTarget()
	switch w.Spec().RuntimeType {
	case "vllm":
		return e.clientFor(engineKey{target, grpcworker.VLLM})
	case "sglang":
		return e.clientFor(engineKey{target, grpcworker.SGLang})
	}
	e.mu.Lock()
	d, ok := e.detected[target]
	e.mu.Unlock()
	if ok {
		return e.clientFor(engineKey{target, d})
	}
	c, err := e.clientFor(engineKey{target, grpcworker.SGLang})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	err = c.HealthCheck(ctx)
	switch {
	case status.Code(err) == codes.Unimplemented:
		d = grpcworker.VLLM
	case err == nil || errors.Is(err, grpcworker.ErrUnhealthy):
		d = grpcworker.SGLang
	default:
		return c, nil // not known yet: asked again next time
	}
	e.mu.Lock()
	e.detected[target] = d
	e.mu.Unlock()
	return e.clientFor(engineKey{target, d})
}

func (e *engines) clientFor(k engineKey) (*grpcworker.Client, error) {
	e.mu.Lock()
	c, closed := e.clients[k], e.closed
	e.mu.Unlock()
	if closed {
		return nil, grpcworker.ErrClosed
	}
	if c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	c, err := grpcworker.Dial(ctx, k.target, k.dialect, e.cfg)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = c.Close()
		return nil, grpcworker.ErrClosed
	}
	if old := e.clients[k]; old != nil { // another caller dialled it meanwhile
		_ = c.Close()
		return old, nil
	}
	e.clients[k] = c
	return c, nil
}

// sync closes the clients of engines no worker of snap names.
func (e *engines) sync(snap *worker.Snapshot) {
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

func (e *engines) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for k, c := range e.clients {
		_ = c.Close()
		delete(e.clients, k)
	}
}

// probe is the health checker's probe of a gRPC worker: the engine's HealthCheck RPC. The
// first success also asks the engine's GetModelInfo for describe, and counts only once that
// answered: a worker turns ready with its model's limits known.
func (e *engines) probe(ctx context.Context, w *worker.Worker) error {
	c, err := e.client(w)
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
	if err := e.describe(ctx, c, info); err != nil {
		return err
	}
	e.mu.Lock()
	e.described[target] = true
	e.mu.Unlock()
	return nil
}

// loads is the load monitor's poll of a gRPC worker: GetLoads, the worker's own rank when it
// is one DP rank of the engine, else the engine's totals.
func (e *engines) loads(ctx context.Context, w *worker.Worker) (*worker.LoadReport, error) {
	c, err := e.client(w)
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

// probeAddress is discovery's gRPC probe of a pod's address: nil once the engine there
// answers HealthCheck healthy (SGLang's service, else vLLM's).
func (e *engines) probeAddress(ctx context.Context, hostPort string) error {
	var err error
	for _, d := range []grpcworker.Dialect{grpcworker.SGLang, grpcworker.VLLM} {
		var c *grpcworker.Client
		if c, err = e.clientFor(engineKey{hostPort, d}); err != nil {
			return err
		}
		if err = c.HealthCheck(ctx); status.Code(err) != codes.Unimplemented {
			return err
		}
	}
	return err
}

// admin answers an admin route of a gRPC worker from its engine's gRPC service.
func (e *engines) admin(ctx context.Context, w *worker.Worker, method, path string) (int, []byte, string, error) {
	c, err := e.client(w)
	if err != nil {
		return 0, nil, "", err
	}
	return c.AdminCall(ctx, w.DPRank(), method, path)
}

// discoverModels wraps the HTTP model discoverer: a grpc:// worker's model is its engine's
// GetModelInfo model id (SGLang's service first, then vLLM's).
func (e *engines) discoverModels(http func(ctx context.Context, url, apiKey string) ([]string, error)) func(ctx context.Context, url, apiKey string) ([]string, error) {
	return func(ctx context.Context, url, apiKey string) ([]string, error) {
		if !strings.HasPrefix(url, "grpc://") {
			return http(ctx, url, apiKey)
		}
		target, _, _ := strings.Cut(strings.TrimPrefix(url, "grpc://"), "@")
		var last error
		for _, d := range []grpcworker.Dialect{grpcworker.SGLang, grpcworker.VLLM} {
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

// models are the tokenizers of the models gRPC workers serve (--model-path /
// --tokenizer-path), read by the gRPC path per request without a lock.
type models struct {
	byID atomic.Pointer[map[string]fastpath.GRPCModel]
	// only is the one model loaded, served for a request that names none or another name.
	only atomic.Pointer[fastpath.GRPCModel]

	mu sync.Mutex // serialises the catalog's copy-on-write (fetch, learn)
}

// fetch loads the tokenizer of the engine's model from the engine itself (GetTokenizer) when
// no local one serves it: no --model-path / --tokenizer-path directory. An engine without
// GetTokenizer leaves its model without a tokenizer (its requests get 404 naming the flags);
// another failure is returned, so a later probe tries again.
func (m *models) fetch(ctx context.Context, c *grpcworker.Client, id string, log *slog.Logger) error {
	if m.only.Load() != nil {
		return nil
	}
	if byID := m.byID.Load(); byID != nil {
		if _, ok := (*byID)[id]; ok {
			return nil
		}
	}
	files, err := c.GetTokenizerFiles(ctx)
	if status.Code(err) == codes.Unimplemented {
		log.Warn("The engine serves no tokenizer (GetTokenizer) and none was given: requests for its model get 404 until --model-path or --tokenizer-path names a local directory", "engine", c.Addr(), "model", id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("GetTokenizer: %w", err)
	}
	x, err := modelFromFiles(files, id, "the tokenizer of grpc://"+c.Addr())
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byID := map[string]fastpath.GRPCModel{}
	if old := m.byID.Load(); old != nil {
		maps.Copy(byID, *old)
	}
	if _, ok := byID[id]; !ok { // another engine of the model may have been first
		byID[id] = x
		m.byID.Store(&byID)
		log.Info("Tokenizer loaded from the engine for gRPC workers", "engine", c.Addr(), "model", id, "vocab", x.Tokenizer.VocabSize(), "chat_template", x.Template != nil)
	}
	return nil
}

// learn records what an engine reports of its model: the longest prompt it accepts (the
// smallest over the model's engines, so a prompt one engine would refuse is refused before
// any sees it) and its EOS ids beside the tokenizer's. An engine's model served by the only
// tokenizer loaded is known under the engine's model id from then on.
func (m *models) learn(info grpcworker.ModelInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byID := map[string]fastpath.GRPCModel{}
	if old := m.byID.Load(); old != nil {
		maps.Copy(byID, *old)
	}
	x, ok := byID[info.ModelID]
	if !ok {
		only := m.only.Load()
		if only == nil {
			return // no tokenizer for it: its requests get 404 naming the flags
		}
		x = *only
	}
	limit := info.MaxReqInputLen
	if limit <= 0 {
		limit = info.MaxContextLength
	}
	if limit > 0 && (x.MaxPromptTokens == 0 || limit < x.MaxPromptTokens) {
		x.MaxPromptTokens = limit
	}
	for _, id := range info.EOSTokenIDs {
		if !slices.Contains(x.EOSTokenIDs, id) {
			x.EOSTokenIDs = append(slices.Clip(x.EOSTokenIDs), id)
		}
	}
	if only := m.only.Load(); only != nil && x.Tokenizer == only.Tokenizer {
		o := *only // the same tokenizer under its own id, with what was learned
		o.EOSTokenIDs = x.EOSTokenIDs
		if x.MaxPromptTokens > 0 && (o.MaxPromptTokens == 0 || x.MaxPromptTokens < o.MaxPromptTokens) {
			o.MaxPromptTokens = x.MaxPromptTokens // the smallest over every engine it serves
		}
		m.only.Store(&o)
		byID[o.ID] = o
	}
	if !ok {
		x.ID = info.ModelID
	}
	byID[info.ModelID] = x
	m.byID.Store(&byID)
}

// lookup finds the model a request names: its id, else the only model loaded (the spec
// product serves the one tokenizer it was started with whatever the request calls it).
func (m *models) lookup(name string) (fastpath.GRPCModel, bool) {
	if byID := m.byID.Load(); byID != nil {
		if x, ok := (*byID)[name]; ok {
			return x, true
		}
	}
	if x := m.only.Load(); x != nil {
		return *x, true
	}
	return fastpath.GRPCModel{}, false
}

// loadModel reads a model directory (tokenizer.json, tokenizer_config.json,
// generation_config.json) for the gRPC path. id names it for requests; the directory's base
// name when empty.
func loadModel(dir, id string) (fastpath.GRPCModel, error) {
	var files grpcworker.TokenizerFiles
	var err error
	if files.Tokenizer, err = os.ReadFile(filepath.Join(dir, "tokenizer.json")); err != nil {
		return fastpath.GRPCModel{}, fmt.Errorf("%s: cannot load tokenizer: %w", dir, err)
	}
	for name, dst := range map[string]*[]byte{"tokenizer_config.json": &files.Config, "generation_config.json": &files.Generation} {
		if *dst, err = os.ReadFile(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fastpath.GRPCModel{}, fmt.Errorf("%s: cannot load tokenizer: %w", dir, err)
		}
	}
	if id == "" {
		id = filepath.Base(filepath.Clean(dir))
	}
	return modelFromFiles(files, id, dir)
}

// modelFromFiles builds a model of the gRPC path from its tokenizer files; source names
// where they came from in errors.
func modelFromFiles(files grpcworker.TokenizerFiles, id, source string) (fastpath.GRPCModel, error) {
	tok, err := tokenizer.LoadJSON(files.Tokenizer, files.Config, files.Generation)
	if err != nil {
		return fastpath.GRPCModel{}, fmt.Errorf("%s: %w", source, err)
	}
	m := fastpath.GRPCModel{ID: id, Tokenizer: tok, EOSTokenIDs: tok.EOSTokenIDs()}
	if hasChatTemplate(files.Config) {
		// Without a chat template a model still serves completions and /generate; chat
		// requests get a 400 saying why.
		if m.Template, err = chat.FromTokenizerConfig(files.Config); err != nil {
			return fastpath.GRPCModel{}, fmt.Errorf("%s: tokenizer_config.json: %w", source, err)
		}
	}
	return m, nil
}

func hasChatTemplate(config []byte) bool {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	return json.Unmarshal(config, &cfg) == nil && len(cfg.ChatTemplate) > 0 && string(cfg.ChatTemplate) != "null"
}

// grpcBackend serves grpc:// workers: the engines' clients and the tokenizer of
// --tokenizer-path or --model-path when it is a local directory (validate refuses gRPC
// workers on the command line without one). Without a tokenizer, a request for a gRPC
// worker's model gets 404 naming the flags.
func (g *gateway) grpcBackend() (*fastpath.GRPCBackend, error) {
	ms := &models{}
	if dir := g.o.tokenizerDir(); dir != "" && isDir(dir) {
		m, err := loadModel(dir, "")
		if err != nil {
			return nil, err
		}
		byID := map[string]fastpath.GRPCModel{m.ID: m}
		ms.byID.Store(&byID)
		ms.only.Store(&m)
		g.log.Info("Tokenizer loaded for gRPC workers", "path", dir, "model", m.ID, "vocab", m.Tokenizer.VocabSize(), "chat_template", m.Template != nil)
	}
	g.engines.mu.Lock()
	g.engines.describe = func(ctx context.Context, c *grpcworker.Client, info grpcworker.ModelInfo) error {
		if err := ms.fetch(ctx, c, info.ModelID, g.log); err != nil {
			return err
		}
		ms.learn(info)
		return nil
	}
	g.engines.mu.Unlock()
	return &fastpath.GRPCBackend{
		IsGRPC: func(w *worker.Worker) bool { return w.Protocol() == worker.ProtocolGRPC },
		Client: g.engines.client,
		Model:  ms.lookup,
		DPRank: (*worker.Worker).DPRank,
		Admin:  g.engines.admin,
	}, nil
}

// tokenizerDir is --tokenizer-path, else --model-path.
func (o *options) tokenizerDir() string {
	if o.tokenizerPath != "" {
		return o.tokenizerPath
	}
	return o.modelPath
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
