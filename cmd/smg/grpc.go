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
	"runtime"
	"slices"
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

// models are the tokenizers of the models gRPC workers serve (--model-path /
// --tokenizer-path), read by the gRPC path per request without a lock.
type models struct {
	byID atomic.Pointer[map[string]fastpath.GRPCModel]
	// only is the one model loaded, served for a request that names none or another name.
	only atomic.Pointer[fastpath.GRPCModel]

	mu sync.Mutex // serialises the catalog's copy-on-write (fetch, learn, loadLabelled)
	// labelled is the directory a worker label loaded each model's tokenizer from.
	labelled map[string]string
	// failed holds the worker URL + label directory pairs whose failure was logged.
	failed map[[2]string]bool
}

// firstFailure reports whether a worker's label directory fails for the first time.
func (m *models) firstFailure(url, dir string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed[[2]string{url, dir}] {
		return false
	}
	if m.failed == nil {
		m.failed = map[[2]string]bool{}
	}
	m.failed[[2]string{url, dir}] = true
	return true
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

// Worker labels naming a local model directory whose tokenizer serves the worker's model, as
// --tokenizer-path and --model-path do for the whole gateway (tokenizer_path first).
const (
	labelTokenizerPath = "tokenizer_path"
	labelModelPath     = "model_path"
)

// workerTokenizerDir is the directory w's labels name for its model's tokenizer, and the label
// that named it; "" when neither label is set.
func workerTokenizerDir(w *worker.Worker) (dir, label string) {
	for _, l := range []string{labelTokenizerPath, labelModelPath} {
		if d := w.Label(l); d != "" {
			return d, l
		}
	}
	return "", ""
}

// loadLabelled loads the tokenizer a worker's label names for the model id, unless that model
// already has the tokenizer of the same directory. A label names the model's tokenizer more
// precisely than the gateway's flags, so it replaces theirs (and one fetched from an engine)
// for that model.
func (m *models) loadLabelled(dir, label, id string, log *slog.Logger) error {
	if !isDir(dir) {
		return fmt.Errorf("label %s=%q is not a local directory: point it at a directory holding the model's tokenizer.json (and tokenizer_config.json), or remove the label to take the tokenizer from --model-path or the engine", label, dir)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.labelled[id] == dir {
		return nil
	}
	x, err := loadModel(dir, id)
	if err != nil {
		return err
	}
	byID := map[string]fastpath.GRPCModel{}
	if old := m.byID.Load(); old != nil {
		maps.Copy(byID, *old)
	}
	if prev, ok := byID[id]; ok { // keep what the model's other engines reported
		x.MaxPromptTokens = prev.MaxPromptTokens
		for _, eos := range prev.EOSTokenIDs {
			if !slices.Contains(x.EOSTokenIDs, eos) {
				x.EOSTokenIDs = append(slices.Clip(x.EOSTokenIDs), eos)
			}
		}
	}
	byID[id] = x
	m.byID.Store(&byID)
	if m.labelled == nil {
		m.labelled = map[string]string{}
	}
	m.labelled[id] = dir
	log.Info("Tokenizer loaded from a worker label for gRPC workers", "label", label, "path", dir, "model", id, "vocab", x.Tokenizer.VocabSize(), "chat_template", x.Template != nil)
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
	g.engines.SetDescribe(func(ctx context.Context, c *grpcworker.Client, w *worker.Worker, info grpcworker.ModelInfo) error {
		if dir, label := workerTokenizerDir(w); dir != "" {
			if err := ms.loadLabelled(dir, label, info.ModelID, g.log); err != nil {
				if ms.firstFailure(w.URL, dir) { // the probe's error is logged at debug only
					g.log.Warn("gRPC worker stays out of rotation: its tokenizer label cannot be loaded", "worker", w.URL, "error", err)
				}
				return fmt.Errorf("worker %s: %w", w.URL, err)
			}
		} else if err := ms.fetch(ctx, c, info.ModelID, g.log); err != nil {
			return err
		}
		ms.learn(info)
		return nil
	})
	return &fastpath.GRPCBackend{
		IsGRPC: func(w *worker.Worker) bool { return w.Protocol() == worker.ProtocolGRPC },
		Client: g.engines.Client,
		Model:  ms.lookup,
		DPRank: (*worker.Worker).DPRank,
		Admin:  g.engines.Admin,
		// One rendering and tokenizing request a core: the loops keep theirs.
		Tokenizers: runtime.GOMAXPROCS(0),
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

// engines is the gateway's gRPC engine-client fleet.
type engines struct{ *grpcworker.Fleet }

func newEngines() *engines { return &engines{grpcworker.NewFleet(grpcworker.DefaultConfig())} }

// client returns w's engine client, dialling it the first time.
func (e *engines) client(w *worker.Worker) (*grpcworker.Client, error) { return e.Client(w) }
