package workertest

import (
	"context"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// Ready returns one ready worker at url serving model, from a registry of its own (closed
// when tb ends): a Worker exists only inside a registry.
func Ready(tb testing.TB, url, model string) *worker.Worker {
	tb.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(reg.Close)
	spec := worker.Spec{URL: url, ModelID: model}
	if err := spec.Normalize(); err != nil {
		tb.Fatal(err)
	}
	w, err := reg.Add(context.Background(), spec, worker.StatusReady)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}
