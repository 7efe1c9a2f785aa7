package kvevents

import (
	"errors"
	"fmt"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/kvevents/kvindex"
)

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Index bounds each model's block index. Default kvindex.DefaultConfig().
	Index kvindex.Config
	// GRPC configures the consumers of gRPC workers. Default DefaultGRPCConfig().
	GRPC GRPCConfig
	// Metrics receives the consumers' and indexes' series. Nil: none.
	Metrics *metrics.Set
	// OnSlotsChanged, when set, is called (from a consumer's goroutine, no lock held) after a
	// worker's slot left an index on its own: its engine answered that it publishes no
	// events. Pickers resolve slots when they are built, so cmd/smg rebuilds them.
	OnSlotsChanged func()
}

// DefaultManagerConfig returns the defaults.
func DefaultManagerConfig() ManagerConfig {
	return ManagerConfig{Index: kvindex.DefaultConfig(), GRPC: DefaultGRPCConfig()}
}

// Validate reports every problem in c, each saying how to fix it.
func (c ManagerConfig) Validate() error {
	return errors.Join(c.Index.Validate(), c.GRPC.Validate())
}

// Manager owns the event consumers of a gateway's workers and one block index per model:
// the assembly cmd/smg drives from the registry (a worker added with an event source, a
// worker removed). A worker's blocks go with it, and a model's index with its last worker.
// Safe for concurrent use.
type Manager struct {
	cfg     ManagerConfig
	mu      sync.Mutex
	models  map[string]*modelIndex
	workers map[string]*managed
	wg      sync.WaitGroup
}

type modelIndex struct {
	idx        *kvindex.Index
	workers    int
	unregister func()
}

type managed struct {
	model      string
	close      func()
	unregister func()
}

// NewManager returns an empty Manager; cfg must be valid.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, models: map[string]*modelIndex{}, workers: map[string]*managed{}}, nil
}

// Index returns model's block index, nil when none of its workers publishes events.
func (m *Manager) Index(model string) *kvindex.Index {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mi := m.models[model]; mi != nil {
		return mi.idx
	}
	return nil
}

// holder returns the index slot of url in model's index, creating both; m.mu is held.
func (m *Manager) holder(url, model string) (*kvindex.Index, kvindex.Holder, error) {
	if _, ok := m.workers[url]; ok {
		return nil, 0, fmt.Errorf("cannot subscribe to the KV events of %s twice: remove it first", url)
	}
	mi := m.models[model]
	if mi == nil {
		idx, err := kvindex.New(m.cfg.Index)
		if err != nil {
			return nil, 0, err
		}
		mi = &modelIndex{idx: idx, unregister: func() {}}
		if m.cfg.Metrics != nil {
			mi.unregister = RegisterIndexMetrics(m.cfg.Metrics, model, idx)
		}
		m.models[model] = mi
	}
	mi.workers++
	return mi.idx, mi.idx.Holder(url), nil
}

// AddZMQ subscribes to the ZMQ events of the worker url of model; cfg carries its endpoints.
func (m *Manager) AddZMQ(url, model string, cfg ZMQConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("cannot subscribe to the KV events of %s: %w", url, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	idx, h, err := m.holder(url, model)
	if err != nil {
		return err
	}
	// DP ranks are separate caches of one worker: they share its slot, as routing reaches
	// the worker, not a rank.
	c, err := StartZMQ(cfg, func(int) Sink { return IndexSink{Index: idx, Holder: h} })
	if err != nil {
		m.release(url, model)
		return err
	}
	m.workers[url] = &managed{model: model, close: c.Close, unregister: m.register(url, c.Stats)}
	return nil
}

// AddGRPC follows the SubscribeKvEvents stream of the gRPC worker url of model. rank is the
// worker's data-parallel rank: the engine streams every rank's batches, and only this one's
// are the worker's (-1: every batch, an engine routed as one worker). A worker that answers
// Unimplemented publishes no events: its slot is removed (then OnSlotsChanged), so its model
// routes on the approximate tree.
func (m *Manager) AddGRPC(url, model string, rank int, client Subscriber) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx, h, err := m.holder(url, model)
	if err != nil {
		return err
	}
	var sink Sink = IndexSink{Index: idx, Holder: h}
	if rank >= 0 {
		sink = rankSink{sink, rank}
	}
	c, err := StartGRPC(m.cfg.GRPC, client, sink)
	if err != nil {
		m.release(url, model)
		return err
	}
	w := &managed{model: model, close: c.Close, unregister: m.register(url, c.Stats)}
	m.workers[url] = w
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-c.Done()
		if !errors.Is(c.Err(), ErrNoEvents) {
			return
		}
		m.mu.Lock()
		current := m.workers[url] == w // not removed (or replaced) meanwhile
		if current {
			idx.Remove(url)
		}
		m.mu.Unlock()
		if current && m.cfg.OnSlotsChanged != nil {
			m.cfg.OnSlotsChanged()
		}
	}()
	return nil
}

func (m *Manager) register(url string, stats func() Stats) func() {
	if m.cfg.Metrics == nil {
		return func() {}
	}
	return RegisterMetrics(m.cfg.Metrics, url, stats)
}

// release undoes holder; m.mu is held.
func (m *Manager) release(url, model string) {
	mi := m.models[model]
	mi.idx.Remove(url)
	if mi.workers--; mi.workers == 0 {
		mi.unregister()
		delete(m.models, model)
	}
}

// Remove stops the worker's consumer and drops its blocks and series.
func (m *Manager) Remove(url string) {
	m.mu.Lock()
	w := m.workers[url]
	if w == nil {
		m.mu.Unlock()
		return
	}
	delete(m.workers, url)
	m.mu.Unlock()
	w.close() // outside the lock: a gRPC watcher may be waiting for it
	w.unregister()
	m.mu.Lock()
	m.release(url, w.model)
	m.mu.Unlock()
}

// Close removes every worker and waits for the consumers' goroutines.
func (m *Manager) Close() {
	m.mu.Lock()
	urls := make([]string, 0, len(m.workers))
	for u := range m.workers {
		urls = append(urls, u)
	}
	m.mu.Unlock()
	for _, u := range urls {
		m.Remove(u)
	}
	m.wg.Wait()
}
