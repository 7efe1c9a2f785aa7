package discovery

import (
	"context"

	"github.com/smg-go/smg/worker"
)

// Registry is what discovery needs of the worker registry; *worker.Registry satisfies it.
type Registry interface {
	Current() *worker.Snapshot
	Add(ctx context.Context, spec worker.Spec, status worker.Status) (*worker.Worker, error)
	Remove(ctx context.Context, id string) (*worker.Worker, error)
	Drain(ctx context.Context, id string) (*worker.Worker, error)
}

var _ Registry = (*worker.Registry)(nil)
