package mesh

import (
	"context"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
)

func TestWorkerOwnershipRules(t *testing.T) {
	a := startRouter(t, "A", "127.0.0.1", 0, nil)
	b := startRouter(t, "B", "127.0.0.2", 0, nil, a)
	c := startRouter(t, "C", "127.0.0.3", 0, nil, a)

	// A and B both register the same URL; C imports it once.
	wa := addWorker(t, a, "http://10.8.0.1:8000", "")
	wb := addWorker(t, b, "http://10.8.0.1:8000", "")
	only := addWorker(t, a, "http://10.8.0.2:8000", "")
	// C must hold B's entry too, not only A's: otherwise A's tombstone can reach C first and
	// C rightly drops the URL until B's entry arrives, which is not the rule under test.
	hasEntry := func(r *router, key string) bool {
		for _, e := range r.mesh.Node().Entries() {
			if e.Key == key {
				return true
			}
		}
		return false
	}
	testutil.Eventually(t, "C imports both URLs", func() bool {
		return c.hasWorker(wa.URL) && c.hasWorker(only.URL) && b.hasWorker(only.URL) && hasEntry(c, "worker:B:"+wb.URL)
	})
	if b.reg.Current().ByURL(wa.URL) != wb {
		t.Fatal("B's own registration was replaced by A's copy")
	}

	// A stops publishing the shared URL: B still owns it, so C keeps it; B never loses its own.
	if _, err := a.reg.Remove(context.Background(), wa.ID); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "A's tombstone reaches C", func() bool { return !hasEntry(c, "worker:A:"+wa.URL) })
	if !c.hasWorker(wa.URL) || b.reg.Current().ByURL(wa.URL) != wb {
		t.Fatal("a URL another owner still publishes was removed")
	}

	// A peer's delete of an import is undone by the next reconcile pass.
	imp := c.reg.Current().ByURL(only.URL)
	if _, err := c.reg.Remove(context.Background(), imp.ID); err != nil {
		t.Fatal(err)
	}
	c.mesh.ws.Reconcile(context.Background())
	if !c.hasWorker(only.URL) {
		t.Fatal("a locally deleted import was not imported again")
	}

	// A departs for good: its workers stay on B and C.
	a.stop()
	testutil.Eventually(t, "A DOWN on B and C", func() bool {
		return b.status("A") == wire.StatusDown && c.status("A") == wire.StatusDown
	})
	c.mesh.ws.Reconcile(context.Background())
	if !b.hasWorker(only.URL) || !c.hasWorker(only.URL) {
		t.Fatal("a departed router's worker was removed")
	}
}
