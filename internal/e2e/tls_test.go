package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestTLSWorkersBehindAPrivateCA (issues 14 and 17): two real mock engines serve over TLS
// with a certificate of a CA made for the test; smg trusts that CA through --worker-ca-file
// alone (not the system's roots). The workers' models are discovered, health checks pass, a
// request and a stream are answered,
// and a body past --max-buffered-request-bytes streams to the engine intact (its SHA-256 as
// the engine received it). Without --worker-ca-file the same workers are refused at the
// handshake, and the error names the certificate.
func TestTLSWorkersBehindAPrivateCA(t *testing.T) {
	pki := testutil.NewPKI(t)
	ca, cert, key := pki.Files(t)
	m := StartMocks(t, 2, "--server", "fasthttp", "--tls-cert", cert, "--tls-key", key)
	for _, u := range m.URLs {
		if !strings.HasPrefix(u, "https://") {
			t.Fatalf("mock worker %s: want an https URL", u)
		}
	}
	g := StartGateway(t, "--worker-urls", m.URLs[0], m.URLs[1], "--worker-ca-file", ca, "--max-buffered-request-bytes", "4096")
	if strings.Contains(g.Output(), "Cannot discover the worker's models") {
		t.Fatalf("the workers' models were not discovered over TLS with --worker-ca-file:\n%s", g.Output())
	}

	small := `{"model":"mock-model","messages":[{"role":"user","content":"hi"}]}`
	for range 4 {
		if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", small, nil); r.Status != 200 || !strings.Contains(r.Body, `"choices"`) {
			t.Fatalf("over TLS: %d %s", r.Status, r.Body)
		}
	}
	resp, br := Stream(t, g.URL+"/v1/chat/completions", `{"model":"mock-model","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":4}`)
	events := 0
	for {
		ev, err := ReadEvent(br)
		if err != nil {
			t.Fatalf("stream over TLS after %d events: %v", events, err)
		}
		if ev == "[DONE]" {
			break
		}
		events++
	}
	resp.Body.Close()
	if events == 0 {
		t.Fatal("a stream over TLS without events")
	}
	large := `{"model":"mock-model","messages":[{"role":"user","content":"` + strings.Repeat("0123456789abcdef", 1<<16) + `"}]} not json`
	checkHash(t, MustDo(t, "POST", g.URL+"/v1/chat/completions", large, map[string]string{"X-Mock-Fault": "body-sha256"}), large)
	for _, u := range m.URLs {
		if v, ok := Metric(t, g.MetricsURL, fmt.Sprintf(`smg_worker_requests_active{worker=%q}`, u)); !ok || v != 0 {
			t.Fatalf("worker %s: %v requests in flight after the last answer", u, v)
		}
	}

	plain := StartGateway(t, "--worker-urls", m.URLs[0], "--disable-health-check")
	r := MustDo(t, "POST", plain.URL+"/v1/chat/completions", small, nil)
	if r.Status != 502 || !strings.Contains(r.Body, "certificate") {
		t.Fatalf("without --worker-ca-file: %d %s, want 502 naming the certificate", r.Status, r.Body)
	}
	if !strings.Contains(plain.Output(), "Cannot discover the worker's models") {
		t.Fatalf("without --worker-ca-file the model discovery should fail at the handshake:\n%s", plain.Output())
	}
}
