package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/e2e"
)

// TestPprofAnswersLoopbackClientsOnly: through the metrics port's mux, a connection that is
// not loopback at both ends gets 403 naming the flag that opens pprof (a non-loopback peer,
// or a loopback peer reaching the pod's own IP, as a service-mesh sidecar hands on a remote
// client), loopback connections (v4, v6, v4-mapped) get the profile index,
// --pprof-allow-remote serves everyone, --disable-pprof no one.
func TestPprofAnswersLoopbackClientsOnly(t *testing.T) {
	noEngines := func(io.Writer) {}
	cases := []struct {
		name                string
		withPprof, remoteOK bool
		peer, local         string
		want                int
	}{
		{"remote refused", true, false, "10.1.2.3:5555", "10.0.0.5:29000", http.StatusForbidden},
		{"remote v6 refused", true, false, "[2001:db8::1]:5555", "[2001:db8::5]:29000", http.StatusForbidden},
		{"unparsable peer refused", true, false, "pipe", "127.0.0.1:29000", http.StatusForbidden},
		{"sidecar-proxied remote refused", true, false, "127.0.0.6:5555", "10.0.0.5:29000", http.StatusForbidden},
		{"no local address refused", true, false, "127.0.0.1:5555", "", http.StatusForbidden},
		{"loopback v4", true, false, "127.0.0.1:5555", "127.0.0.1:29000", http.StatusOK},
		{"loopback 127/8", true, false, "127.0.0.9:5555", "127.0.0.1:29000", http.StatusOK},
		{"loopback v6", true, false, "[::1]:5555", "[::1]:29000", http.StatusOK},
		{"loopback v4-mapped", true, false, "[::ffff:127.0.0.1]:5555", "[::ffff:127.0.0.1]:29000", http.StatusOK},
		{"remote allowed by the flag", true, true, "10.1.2.3:5555", "10.0.0.5:29000", http.StatusOK},
		{"disabled", false, true, "127.0.0.1:5555", "127.0.0.1:29000", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mux := observabilityMux(metrics.NewSet(), noEngines, c.withPprof, c.remoteOK)
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
				req := httptest.NewRequest("GET", path, nil)
				req.RemoteAddr = c.peer
				if c.local != "" {
					ap, err := netip.ParseAddrPort(c.local)
					if err != nil {
						t.Fatal(err)
					}
					req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(ap)))
				}
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				if rec.Code != c.want {
					t.Errorf("GET %s from %s: status %d, want %d", path, c.peer, rec.Code, c.want)
				}
				if c.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), "--pprof-allow-remote") {
					t.Errorf("the refusal does not say how to open pprof: %q", rec.Body.String())
				}
			}
			// /metrics is for every client whatever the pprof setting.
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.RemoteAddr = c.peer
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Errorf("GET /metrics from %s: status %d", c.peer, rec.Code)
			}
		})
	}
}

// TestPprofOfTheRealBinaryServesLoopback: the running gateway serves its profile index to a
// loopback client by default.
func TestPprofOfTheRealBinaryServesLoopback(t *testing.T) {
	mocks := e2e.StartMocks(t, 1)
	g := e2e.StartGateway(t, "--worker-urls", mocks.URLs[0])
	base := strings.TrimSuffix(g.MetricsURL, "/metrics")
	r := e2e.MustDo(t, "GET", base+"/debug/pprof/", "", nil)
	if r.Status != http.StatusOK || !strings.Contains(r.Body, "goroutine") {
		t.Fatalf("GET /debug/pprof/ over loopback: %d %.200q", r.Status, r.Body)
	}
}
