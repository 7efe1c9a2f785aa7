package worker

import "sort"

// Snapshot is an immutable view of the registry, published after every change. Everything
// reachable from it is read-only.
type Snapshot struct {
	// Version increases by one with every publication.
	Version uint64
	// Workers lists every registered worker in registration order, whatever its status.
	Workers []*Worker

	byID     map[string]*Worker
	byURL    map[string]*Worker
	byModel  map[string][]*Worker
	models   []string
	anyModel []*Worker
	maxIndex uint32
	readyCnt int
}

func newSnapshot(version uint64, workers []*Worker) *Snapshot {
	s := &Snapshot{
		Version: version,
		Workers: workers,
		byID:    make(map[string]*Worker, len(workers)),
		byURL:   make(map[string]*Worker, len(workers)),
		byModel: make(map[string][]*Worker),
	}
	for _, w := range workers {
		s.byID[w.ID] = w
		s.byURL[w.URL] = w
		if w.Index+1 > s.maxIndex {
			s.maxIndex = w.Index + 1
		}
		if w.Ready() {
			s.readyCnt++
		}
		if len(w.Models) == 0 {
			s.anyModel = append(s.anyModel, w)
			continue
		}
		for _, m := range w.Models {
			s.byModel[m] = append(s.byModel[m], w)
		}
	}
	for m := range s.byModel {
		s.models = append(s.models, m)
	}
	sort.Strings(s.models)
	return s
}

// ByID returns the worker with the given id, or nil.
func (s *Snapshot) ByID(id string) *Worker { return s.byID[id] }

// ByURL returns the worker with the given canonical URL, or nil.
func (s *Snapshot) ByURL(url string) *Worker { return s.byURL[url] }

// Models returns the sorted ids of the models some worker declares.
func (s *Snapshot) Models() []string { return s.models }

// ModelWorkers returns the workers that declare model, followed by the workers whose model is
// unknown: the gateway cannot tell what those serve, so it offers them for every model rather
// than hide them. The result may be shared: callers must not modify it.
func (s *Snapshot) ModelWorkers(model string) []*Worker {
	declared := s.byModel[model]
	if len(s.anyModel) == 0 {
		return declared
	}
	if len(declared) == 0 {
		return s.anyModel
	}
	out := make([]*Worker, 0, len(declared)+len(s.anyModel))
	return append(append(out, declared...), s.anyModel...)
}

// UnknownModelWorkers returns the workers whose model is unknown.
func (s *Snapshot) UnknownModelWorkers() []*Worker { return s.anyModel }

// IndexBound is one more than the largest Worker.Index in the snapshot: arrays indexed by
// Worker.Index need this length.
func (s *Snapshot) IndexBound() uint32 { return s.maxIndex }

// ReadyCount is the number of workers whose status was Ready at publication time.
func (s *Snapshot) ReadyCount() int { return s.readyCnt }
