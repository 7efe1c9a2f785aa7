package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker/breaker"
)

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := NewRegistry(DefaultConfig().WithLogger(testutil.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func mustSpec(t *testing.T, url, model string) Spec {
	t.Helper()
	s := Spec{URL: url, ModelID: model, APIKey: "secret"}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAddIsPublishedBeforeAddReturns(t *testing.T) {
	r := newTestRegistry(t)
	var published []*Snapshot
	var mu sync.Mutex
	r.Subscribe(func(s *Snapshot) { mu.Lock(); published = append(published, s); mu.Unlock() })
	w, err := r.Add(context.Background(), mustSpec(t, "http://a:1", "m"), StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Current()
	if s.ByID(w.ID) != w || s.ByURL("http://a:1") != w || !slices.Equal(s.Models(), []string{"m"}) || s.ReadyCount() != 1 {
		t.Fatalf("snapshot after Add lacks the worker: %+v", s)
	}
	mu.Lock()
	last := published[len(published)-1]
	mu.Unlock()
	if last != s {
		t.Fatal("subscriber did not see the snapshot Add published")
	}
}

func TestDuplicateURLAndUnknownID(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	w, _ := r.Add(ctx, mustSpec(t, "http://a:1", "m"), StatusReady)
	// The same worker spelled differently is the same URL once canonical.
	if _, err := r.Add(ctx, mustSpec(t, "a:1/", ""), StatusReady); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("duplicate add: %v", err)
	}
	if _, err := r.Remove(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove unknown: %v", err)
	}
	got, err := r.Remove(ctx, w.ID)
	if err != nil || got != w || r.Current().ByID(w.ID) != nil {
		t.Fatalf("remove: %v", err)
	}
	if w.Status() != StatusDraining {
		t.Fatalf("removed worker status %v, want draining", w.Status())
	}
}

func TestIndexesAreDenseAndReused(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	a, _ := r.Add(ctx, mustSpec(t, "http://a:1", "m"), StatusReady)
	b, _ := r.Add(ctx, mustSpec(t, "http://b:1", "m"), StatusReady)
	c, _ := r.Add(ctx, mustSpec(t, "http://c:1", "m"), StatusReady)
	if a.Index != 0 || b.Index != 1 || c.Index != 2 || r.Current().IndexBound() != 3 {
		t.Fatalf("indexes %d %d %d", a.Index, b.Index, c.Index)
	}
	_, _ = r.Remove(ctx, b.ID)
	d, _ := r.Add(ctx, mustSpec(t, "http://d:1", "m"), StatusReady)
	if d.Index != 1 {
		t.Fatalf("freed index not reused: %d", d.Index)
	}
}

func TestStatusChangesRepublish(t *testing.T) {
	r := newTestRegistry(t)
	w, _ := r.Add(context.Background(), mustSpec(t, "http://a:1", "m"), StatusPending)
	v := r.Current().Version
	if r.Current().ReadyCount() != 0 {
		t.Fatal("pending counted ready")
	}
	if err := r.SetStatus(w.ID, StatusReady); err != nil {
		t.Fatal(err)
	}
	// A blocking call queued behind SetStatus returns after its publication.
	_, _ = r.Remove(context.Background(), "sync")
	if s := r.Current(); s.Version <= v || s.ReadyCount() != 1 || !w.Routable() {
		t.Fatalf("status change not published: version %d ready %d", s.Version, s.ReadyCount())
	}
}

func TestAPIKeyIsWriteOnly(t *testing.T) {
	r := newTestRegistry(t)
	w, _ := r.Add(context.Background(), mustSpec(t, "http://a:1", "m"), StatusReady)
	if w.Spec().APIKey != "" {
		t.Fatal("Spec() exposes the API key")
	}
	if string(w.AuthHeader()) != "Bearer secret" {
		t.Fatalf("worker auth header %q", w.AuthHeader())
	}
}

func TestSnapshotModelsAreTheDeclaredOnesSorted(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	_, _ = r.Add(ctx, mustSpec(t, "http://a:1", "m2"), StatusReady)
	_, _ = r.Add(ctx, mustSpec(t, "http://b:1", ""), StatusReady)
	_, _ = r.Add(ctx, mustSpec(t, "http://c:1", "m1"), StatusReady)
	_, _ = r.Add(ctx, mustSpec(t, "http://d:1", "m2"), StatusReady)
	if got := r.Current().Models(); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("models %v, want [m1 m2]: a worker without a model declares none", got)
	}
}

// TestConcurrentReadersSeeConsistentSnapshots runs readers against a churning registry; under
// -race it proves the publication is safe.
func TestConcurrentReadersSeeConsistentSnapshots(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := r.Current()
				for _, w := range s.Workers {
					if s.ByID(w.ID) != w {
						t.Error("snapshot index inconsistent")
						return
					}
					w.InFlight.Add(1)
					w.InFlight.Add(-1)
				}
			}
		}()
	}
	for i := range 200 {
		w, err := r.Add(ctx, mustSpec(t, "http://h:"+itoa(1000+i), "m"), StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_, _ = r.Remove(ctx, w.ID)
		}
	}
	close(stop)
	wg.Wait()
	if n := len(r.Current().Workers); n != 100 {
		t.Fatalf("%d workers, want 100", n)
	}
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func TestCanonicalURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"http://w1:8000", "http://w1:8000", ""},
		{"w1:8000", "http://w1:8000", ""},
		{"http://w1:8000/", "http://w1:8000", ""},
		{"https://w1", "https://w1:443", ""},
		{"http://[::1]:9", "http://[::1]:9", ""},
		{"", "", "empty"},
		{"ftp://w1:1", "", "scheme"},
		{"grpc://w1:50051", "grpc://w1:50051", ""},
		{"grpc://w1:50051@3", "grpc://w1:50051@3", ""},
		{"grpc://[::1]:50051/", "grpc://[::1]:50051", ""},
		{"grpc://w1", "", "give grpc://host:port"},
		{"grpc://w1:50051@x", "", "data-parallel rank"},
		{"grpc://w1:50051@01", "", "data-parallel rank"},
		{"grpc://w1:50051/v1", "", "give grpc://host:port"},
		{"grpcs://w1:50051", "", "TLS to gRPC workers is not supported"},
		{"ipc:///tmp/engine.sock", "", "ipc:// names a ZMQ socket on the gateway's own host"},
		{"http://w1:99999", "", "port"},
		{"http://w1:1/v1", "", "only scheme://host:port"},
		{"http://:80", "", "no host"},
	} {
		got, err := CanonicalURL(tc.in)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrInvalidURL) || !contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func FuzzCanonicalURL(f *testing.F) {
	for _, s := range []string{"http://w1:8000", "w:1", "https://[::1]", "http://a:b", "::::", "http://x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := CanonicalURL(s)
		if err != nil {
			return
		}
		again, err := CanonicalURL(u)
		if err != nil || again != u {
			t.Fatalf("%q → %q is not a fixed point (%q, %v)", s, u, again, err)
		}
	})
}

func TestMaxWorkersCapsRegistrations(t *testing.T) {
	cfg := DefaultConfig().WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	cfg.MaxWorkers = 2
	r, err := NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ctx := context.Background()
	a, _ := r.Add(ctx, mustSpec(t, "http://a:1", "m"), StatusReady)
	if _, err := r.Add(ctx, mustSpec(t, "http://b:1", "m"), StatusReady); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(ctx, mustSpec(t, "http://c:1", "m"), StatusReady); !errors.Is(err, ErrTooManyWorkers) || !strings.Contains(err.Error(), "--max-workers") {
		t.Fatalf("third add past a cap of 2: %v", err)
	}
	if len(r.Current().Workers) != 2 {
		t.Fatalf("%d workers registered", len(r.Current().Workers))
	}
	if _, err := r.Remove(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(ctx, mustSpec(t, "http://c:1", "m"), StatusReady); err != nil {
		t.Fatalf("add after a removal freed a place: %v", err)
	}
}

// TestRegistryConfigRefusesZeroSettings: a zero setting is an error naming the fix, not a
// silent default; DefaultConfig passes.
func TestRegistryConfigRefusesZeroSettings(t *testing.T) {
	if cfg := DefaultConfig(); cfg.Validate() != nil {
		t.Fatalf("DefaultConfig invalid: %v", cfg.Validate())
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"queue", func(c *Config) { c.QueueSize = 0 }, "queue size 0"},
		{"max workers", func(c *Config) { c.MaxWorkers = 0 }, "--max-workers 0"},
		{"connections", func(c *Config) { c.Client.MaxConns = 0 }, "--max-connections-per-worker 0"},
		{"dial timeout", func(c *Config) { c.Client.DialTimeout = 0 }, "dial timeout"},
		{"idle", func(c *Config) { c.Client.MaxIdleConnDuration = 0 }, "idle connection timeout"},
		{"breaker", func(c *Config) { c.Breaker = breaker.Config{} }, "--cb-"},
	} {
		cfg := DefaultConfig()
		tc.change(&cfg)
		if _, err := NewRegistry(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewRegistry error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// TestGRPCWorkers: a grpc:// worker is a gRPC worker, its rank (if any) apart from its
// target; connection_mode must agree with the scheme.
func TestGRPCWorkers(t *testing.T) {
	r, err := NewRegistry(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		url, target string
		rank        int
	}{{"grpc://10.0.0.1:50051", "10.0.0.1:50051", -1}, {"grpc://10.0.0.1:50051@2", "10.0.0.1:50051", 2}} {
		spec := Spec{URL: tc.url, ConnectionMode: "grpc"}
		if err := spec.Normalize(); err != nil {
			t.Fatal(err)
		}
		w, err := r.Add(t.Context(), spec, StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		if w.Protocol() != ProtocolGRPC || w.GRPCTarget() != tc.target || w.DPRank() != tc.rank {
			t.Errorf("%s: protocol %d target %q rank %d", tc.url, w.Protocol(), w.GRPCTarget(), w.DPRank())
		}
	}
	h := Spec{URL: "http://10.0.0.2:8000"}
	if err := h.Normalize(); err != nil {
		t.Fatal(err)
	}
	w, err := r.Add(t.Context(), h, StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	if w.Protocol() != ProtocolHTTP || w.GRPCTarget() != "" || w.DPRank() != -1 {
		t.Errorf("http worker: protocol %d target %q rank %d", w.Protocol(), w.GRPCTarget(), w.DPRank())
	}
	for _, s := range []Spec{{URL: "grpc://10.0.0.3:1", ConnectionMode: "http"}, {URL: "http://10.0.0.3:1", ConnectionMode: "grpc"}} {
		if err := s.Normalize(); err == nil || !contains(err.Error(), "connection_mode") {
			t.Errorf("%+v: %v, want a connection_mode error", s, err)
		}
	}
}

// TestRepublishRunsTheSubscribersAgain: the same workers are published again, so a
// subscriber that reads state outside the registry rebuilds from it.
func TestRepublishRunsTheSubscribersAgain(t *testing.T) {
	r := newTestRegistry(t)
	w, err := r.Add(context.Background(), mustSpec(t, "http://a:1", "m"), StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan *Snapshot, 4)
	r.Subscribe(func(s *Snapshot) { seen <- s })
	<-seen // Subscribe's own run
	if err := r.Republish(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-seen:
		if s.ByID(w.ID) != w || len(s.Workers) != 1 {
			t.Fatalf("republished snapshot %+v, want the same worker", s)
		}
	case <-time.After(time.Minute):
		t.Fatal("Republish ran no subscriber")
	}
}

// TestKVEventsEndpointsAreChecked: an HTTP engine's KV-event sockets are tcp://host:port with
// a host to dial; a gRPC worker takes none (its events come on the engine connection); a
// replay socket needs its publisher.
func TestKVEventsEndpointsAreChecked(t *testing.T) {
	ok := Spec{URL: "http://10.0.0.1:8000", KVEventsEndpoint: "tcp://10.0.0.1:5557", KVEventsReplayEndpoint: "tcp://10.0.0.1:5558"}
	if err := ok.Normalize(); err != nil {
		t.Fatalf("a valid pair: %v", err)
	}
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{URL: "http://a:1", KVEventsEndpoint: "tcp://*:5557"}, "engine's host"},
		{Spec{URL: "http://a:1", KVEventsEndpoint: "ipc:///tmp/kv"}, "tcp://host:port"},
		{Spec{URL: "http://a:1", KVEventsEndpoint: "tcp://a:70000"}, "1-65535"},
		{Spec{URL: "http://a:1", KVEventsReplayEndpoint: "tcp://a:5558"}, "needs kv_events_endpoint"},
		{Spec{URL: "grpc://a:1", KVEventsEndpoint: "tcp://a:5557"}, "SubscribeKvEvents"},
	} {
		if err := c.spec.Normalize(); err == nil || !contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %q", c.spec, err, c.want)
		}
	}
}

// TestSnapshotDeltaSaysWhatThePublicationChanged: each publication's Delta names the workers
// it registered, removed, updated and changed the status of, and nothing else.
func TestSnapshotDeltaSaysWhatThePublicationChanged(t *testing.T) {
	r := newTestRegistry(t)
	ctx := context.Background()
	a, err := r.Add(ctx, mustSpec(t, "http://a:1", "m"), StatusPending)
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Current().Delta(); !slices.Equal(d.Joined, []*Worker{a}) || len(d.Left)+len(d.Updated)+len(d.StatusChanged) != 0 {
		t.Fatalf("after Add: %+v", d)
	}
	if _, err := r.Drain(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if d := r.Current().Delta(); !slices.Equal(d.StatusChanged, []*Worker{a}) || len(d.Joined)+len(d.Left)+len(d.Updated) != 0 {
		t.Fatalf("after Drain: %+v", d)
	}
	b, err := r.Add(ctx, mustSpec(t, "http://b:1", "m"), StatusReady)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(ctx, b.ID, func(s Spec) (Spec, error) { p := 7; s.Priority = &p; return s, nil }); err != nil {
		t.Fatal(err)
	}
	if d := r.Current().Delta(); !slices.Equal(d.Updated, []*Worker{b}) || len(d.Joined)+len(d.Left)+len(d.StatusChanged) != 0 {
		t.Fatalf("after Update: %+v", d)
	}
	if _, err := r.Remove(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if d := r.Current().Delta(); !slices.Equal(d.Left, []*Worker{a}) || len(d.Joined)+len(d.Updated)+len(d.StatusChanged) != 0 {
		t.Fatalf("after Remove: %+v", d)
	}
	if err := r.Republish(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the republication", func() bool { return r.Current().Delta().Left == nil })
	if d := r.Current().Delta(); len(d.Joined)+len(d.Left)+len(d.Updated)+len(d.StatusChanged) != 0 {
		t.Fatalf("a publication that changed nothing: %+v", d)
	}
}
