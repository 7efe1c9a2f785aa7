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
	models   []string
	maxIndex uint32
	readyCnt int
}

func newSnapshot(version uint64, workers []*Worker) *Snapshot {
	s := &Snapshot{
		Version: version,
		Workers: workers,
		byID:    make(map[string]*Worker, len(workers)),
		byURL:   make(map[string]*Worker, len(workers)),
	}
	declared := map[string]bool{}
	for _, w := range workers {
		s.byID[w.ID] = w
		s.byURL[w.URL] = w
		if w.Index+1 > s.maxIndex {
			s.maxIndex = w.Index + 1
		}
		if w.Ready() {
			s.readyCnt++
		}
		for _, m := range w.Models {
			if !declared[m] {
				declared[m] = true
				s.models = append(s.models, m)
			}
		}
	}
	sort.Strings(s.models)
	return s
}

// ByID returns the worker with the given id, or nil.
func (s *Snapshot) ByID(id string) *Worker { return s.byID[id] }

// ByURL returns the worker with the given canonical URL, or nil.
func (s *Snapshot) ByURL(url string) *Worker { return s.byURL[url] }

// Models returns the sorted ids of the models some worker declares. (Which workers serve a
// model is the route table's business: policy.Router groups them.)
func (s *Snapshot) Models() []string { return s.models }

// IndexBound is one more than the largest Worker.Index in the snapshot: arrays indexed by
// Worker.Index need this length.
func (s *Snapshot) IndexBound() uint32 { return s.maxIndex }

// ReadyCount is the number of workers whose status was Ready at publication time.
func (s *Snapshot) ReadyCount() int { return s.readyCnt }
