package policy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// fleet registers n ready workers serving model m and returns the registry's snapshot.
func fleet(t testing.TB, n int, labels ...map[string]string) (*worker.Registry, []*worker.Worker) {
	t.Helper()
	reg, err := worker.NewRegistry(worker.DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	var ws []*worker.Worker
	for i := range n {
		spec := worker.Spec{URL: fmt.Sprintf("http://w%d:8000", i), ModelID: "m"}
		if i < len(labels) {
			spec.Labels = labels[i]
		}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := reg.Add(context.Background(), spec, worker.StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return reg, ws
}
