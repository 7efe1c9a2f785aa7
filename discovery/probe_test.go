package discovery

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/worker"
)

// TestProtocolProbeKeepsWhatAnswers: registration probes HTTP and gRPC at the pod's address
// and keeps the protocol that answers, HTTP when both do; neither is an error naming both.
func TestProtocolProbeKeepsWhatAnswers(t *testing.T) {
	httpUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer httpUp.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks HTTP
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	grpcUp := func(context.Context, string) error { return nil }
	grpcDown := func(context.Context, string) error { return errors.New("Unavailable") }
	for _, c := range []struct {
		name  string
		url   string
		probe func(context.Context, string) error
		want  string
	}{
		{"HTTP only, no gRPC probe", httpUp.URL, nil, httpUp.URL},
		{"both answer: HTTP", httpUp.URL, grpcUp, httpUp.URL},
		{"gRPC only", "http://" + silent.Addr().String(), grpcUp, "grpc://" + silent.Addr().String()},
		{"neither", "http://" + silent.Addr().String(), grpcDown, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) { cfg.ProbeGRPC = c.probe })
			got, err := h.rec.protocolProbe(context.Background(), c.url)
			if c.want == "" {
				if err == nil || !strings.Contains(err.Error(), "neither HTTP") || !strings.Contains(err.Error(), "Unavailable") {
					t.Fatalf("probe of a dead address: %q %v, want an error naming both protocols", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("probe: %q %v, want %q", got, err, c.want)
			}
		})
	}
}

// TestReconcileRegistersAGRPCWorkerByItsAddress: a pod that answers only gRPC is registered
// as grpc://ip:port; later passes see its address as registered, and a removal takes it.
func TestReconcileRegistersAGRPCWorkerByItsAddress(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
	h.rec.probe = func(_ context.Context, url string) (string, error) { return "grpc://" + hostPort(url), nil }
	h.setPods(readyPod("a", "10.0.0.1", app, nil))
	h.rec.Pass(context.Background())
	h.settle()
	if got := h.urls(); len(got) != 1 || got["grpc://10.0.0.1:8000"] != worker.StatusReady {
		t.Fatalf("registry %v, want the gRPC worker", got)
	}
	if plan := h.rec.Pass(context.Background()); len(plan.Add)+len(plan.Remove) != 0 {
		t.Fatalf("a pass in step submitted %+v", plan)
	}
	h.setPods()
	if plan := h.rec.Pass(context.Background()); len(plan.Remove) != 1 || plan.Remove[0].URL != "http://10.0.0.1:8000" {
		t.Fatalf("plan %+v, want the address's removal", plan)
	}
	h.settle()
	if got := h.urls(); len(got) != 0 {
		t.Fatalf("registry %v after the pod left", got)
	}
}

// TestGRPCWorkerRegistersWithoutItsPodsKVEventsPorts: a pod annotated with KV-event ports
// whose engine answers gRPC only is registered (a gRPC worker takes no ZMQ endpoint: it
// publishes on SubscribeKvEvents); an HTTP one carries the endpoints.
func TestGRPCWorkerRegistersWithoutItsPodsKVEventsPorts(t *testing.T) {
	ann := map[string]string{AnnotationKVEventsPort: "5557", AnnotationKVEventsReplayPort: "5558"}
	for _, grpcOnly := range []bool{true, false} {
		h := newHarness(t, func(c *Config) { c.DrainSettle = 0 })
		h.rec.probe = func(_ context.Context, url string) (string, error) {
			if grpcOnly {
				return "grpc://" + hostPort(url), nil
			}
			return url, nil
		}
		h.setPods(readyPod("a", "10.0.0.1", app, ann))
		h.rec.Pass(context.Background())
		h.settle()
		ws := h.reg.Current().Workers
		if len(ws) != 1 {
			t.Fatalf("gRPC only %v: %d workers registered, want 1", grpcOnly, len(ws))
		}
		spec := ws[0].Spec()
		want := "tcp://10.0.0.1:5557"
		if grpcOnly {
			want = ""
		}
		if spec.KVEventsEndpoint != want || (spec.KVEventsReplayEndpoint == "") != grpcOnly {
			t.Errorf("gRPC only %v: %s registered with %q %q, want endpoint %q", grpcOnly, ws[0].URL, spec.KVEventsEndpoint, spec.KVEventsReplayEndpoint, want)
		}
	}
}

// TestAddressKeyCoversEveryRegistrationAtAnAddress: the http:// and grpc:// workers and the
// DP ranks at one address share its key.
func TestAddressKeyCoversEveryRegistrationAtAnAddress(t *testing.T) {
	for _, u := range []string{"http://10.0.0.1:8000", "grpc://10.0.0.1:8000", "grpc://10.0.0.1:8000@3", "http://[fd00::1]:8000"} {
		want := "http://10.0.0.1:8000"
		if strings.Contains(u, "fd00") {
			want = u
		}
		if got := addressKey(u); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", u, got, want)
		}
	}
}

// TestProtocolProbeAsksGRPCOnlyWhenHTTPIsSlowOrDown: an engine that answers HTTP at once is
// never probed over gRPC; one whose HTTP answer is slower than grpcHeadStart is probed over
// both, and HTTP still wins when it answers.
func TestProtocolProbeAsksGRPCOnlyWhenHTTPIsSlowOrDown(t *testing.T) {
	release := make(chan struct{})
	var slow atomic.Bool
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			entered <- struct{}{}
			<-release
		}
	}))
	defer srv.Close()
	var grpcProbes atomic.Int64
	h := newHarness(t, func(cfg *Config) {
		cfg.ProbeGRPC = func(context.Context, string) error { grpcProbes.Add(1); return nil }
	})
	for range 3 {
		if got, err := h.rec.protocolProbe(context.Background(), srv.URL); err != nil || got != srv.URL {
			t.Fatalf("probe of an HTTP engine: %q %v", got, err)
		}
	}
	if n := grpcProbes.Load(); n != 0 {
		t.Fatalf("an engine that answers HTTP at once was probed over gRPC %d times", n)
	}

	slow.Store(true)
	type answer struct {
		url string
		err error
	}
	done := make(chan answer, 1)
	timers := h.clock.Waiting()
	go func() {
		url, err := h.rec.protocolProbe(context.Background(), srv.URL)
		done <- answer{url, err}
	}()
	<-entered
	testutil.Eventually(t, "the head start's timer", func() bool { return h.clock.Waiting() > timers })
	if n := grpcProbes.Load(); n != 0 {
		t.Fatalf("gRPC probed %d times before the head start passed", n)
	}
	h.clock.Advance(grpcHeadStart)
	testutil.Eventually(t, "the gRPC probe", func() bool { return grpcProbes.Load() == 1 })
	close(release)
	if a := <-done; a.err != nil || a.url != srv.URL {
		t.Fatalf("probe of a slow engine that answers both: %q %v, want HTTP's %q", a.url, a.err, srv.URL)
	}
}
