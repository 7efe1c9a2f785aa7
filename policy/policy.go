package policy

import (
	"errors"
	"math/rand/v2"

	"github.com/smg-go/smg/worker"
)

// Sentinel errors a Pick returns; the gateway maps each to one HTTP status in one place.
var (
	// ErrNoAvailableWorkers: no candidate is available (503 no_available_workers).
	ErrNoAvailableWorkers = errors.New("no available workers")
	// ErrInvalidTargetWorker: X-SMG-Target-Worker is not a number or past the end of the
	// available workers (503, no fallback, as the spec says).
	ErrInvalidTargetWorker = errors.New("invalid X-SMG-Target-Worker")
)

// Request is what a policy may read of one request. Every byte slice is a view into the
// client's request, valid only during Pick.
type Request struct {
	// Model is the request's "model" field; empty when absent.
	Model []byte
	// Text is the routing text: chat message contents, the completions prompt or the
	// /generate text.
	Text []byte
	// Tokens are the request's token ids when it carries them (input_ids or
	// x-smg-routing-tokens).
	Tokens []uint32
	// RoutingKey is the validated routing-key header value, if any.
	RoutingKey []byte
	// TargetWorker is the raw X-SMG-Target-Worker header value, if any.
	TargetWorker []byte
	// Rid is the body's "rid" field.
	Rid []byte
	// Authorization, ForwardedFor and Cookie are the implicit routing keys.
	Authorization, ForwardedFor, Cookie []byte
	// Exclude lists workers that already failed this request (retries); pickers skip them.
	Exclude []*worker.Worker
}

// Reset clears r for reuse, keeping the capacity of Exclude.
func (r *Request) Reset() {
	ex := r.Exclude[:0]
	*r = Request{Exclude: ex}
}

// Excluded reports whether w is in r.Exclude.
func (r *Request) Excluded(w *worker.Worker) bool {
	for _, x := range r.Exclude {
		if x == w {
			return true
		}
	}
	return false
}

// Usable reports whether w may take this request now: available (Ready, and, once the
// reliability layer lands, breaker closed and not overloaded) and not excluded by a retry.
func (r *Request) Usable(w *worker.Worker) bool {
	return w.Routable() && !r.Excluded(w)
}

// Result is a Pick's outcome.
type Result struct {
	Worker *worker.Worker
	// CacheMatched is the longest cached prefix of the request a prefix-matching policy
	// found (on any worker), CacheInput the request's length, both in the policy's units
	// (characters or tokens): tracing reports them. 0 for other policies.
	CacheMatched, CacheInput int
}

// Picker chooses a worker for one request. Implementations are immutable and safe for
// concurrent use; see the package documentation for the hot-path rules.
type Picker interface {
	Pick(req *Request) (Result, error)
}

// Recorder is implemented by pickers that learn from where requests are served (cache_aware
// records the prefix for the worker). When a retry moves a request to another worker than the
// one Pick returned, the gateway calls Record with the worker that finally served it.
type Recorder interface {
	Record(req *Request, served *worker.Worker)
}

// TokenWanter is implemented by pickers that route better on token ids than on text
// (cache_aware on the engines' KV events). When WantsTokens is true, the gateway tokenizes a
// text request for the picker, as its engine will, if it holds the model's tokenizer.
type TokenWanter interface {
	WantsTokens() bool
}

// Group is what a Builder builds a Picker for: one model's candidates in one snapshot.
type Group struct {
	// Model is the model id; empty for the route that serves requests naming no model.
	Model string
	// Workers are the candidates: the model's workers that were Ready when the snapshot was
	// published, in registration order. Pickers still check availability live.
	Workers []*worker.Worker
	// Snapshot is the snapshot the group comes from.
	Snapshot *worker.Snapshot
}

// Builder is one policy instance (for one model). Build runs only on the registry's writer
// goroutine, so a Builder needs no locking for the state it reconciles there; state its
// Pickers mutate concurrently must be atomic or otherwise synchronised.
type Builder interface {
	// Name is the policy's name as --policy spells it.
	Name() string
	// Build returns the Picker for g. It is called after every registry change.
	Build(g Group) Picker
}

// Rand is the randomness source of pickers; tests inject a seeded one.
type Rand interface {
	// IntN returns a uniform integer in [0, n); n > 0.
	IntN(n int) int
}

// RuntimeRand draws from math/rand/v2's per-thread ChaCha8 source: no lock, no allocation.
type RuntimeRand struct{}

// IntN implements Rand.
func (RuntimeRand) IntN(n int) int { return rand.IntN(n) }

// PickRandomUsable picks uniformly among the usable workers of ws, or returns nil. It tries a
// few random draws first (the common case: everyone is usable) and scans only when those miss.
func PickRandomUsable(req *Request, ws []*worker.Worker, rnd Rand) *worker.Worker {
	n := len(ws)
	if n == 0 {
		return nil
	}
	for range 2 {
		if w := ws[rnd.IntN(n)]; req.Usable(w) {
			return w
		}
	}
	usable := 0
	for _, w := range ws {
		if req.Usable(w) {
			usable++
		}
	}
	if usable == 0 {
		return nil
	}
	k := rnd.IntN(usable)
	for _, w := range ws {
		if req.Usable(w) {
			if k == 0 {
				return w
			}
			k--
		}
	}
	return nil
}
