package trace

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/telemetry/trace/tracetest"
)

// exportOne exports one sampled record to rcv with a tracer made from the environment as it
// is, waits until the tracer has flushed, and reports whether its request span arrived.
func exportOne(t *testing.T, rcv *tracetest.Receiver) bool {
	t.Helper()
	// An export that cannot succeed (refused, or plaintext to TLS) gives up after a second;
	// Shutdown waits for it, so no exporter goroutine outlives the test.
	tr := startTracerTo(t, rcv, time.Second)
	r := record(t, true)
	tr.Export(r)
	_ = tr.Shutdown(context.Background()) // flushes; a refused export is an error here
	for _, s := range rcv.Spans() {
		if s.GetName() == "smg.request" && bytes.Equal(s.GetTraceId(), r.TraceID[:]) {
			return true
		}
	}
	return false
}

// TestExportSendsTheEnvironmentsHeaders: a receiver that requires an authorization header
// refuses the spans until OTEL_EXPORTER_OTLP_TRACES_HEADERS (or OTEL_EXPORTER_OTLP_HEADERS)
// gives it.
func TestExportSendsTheEnvironmentsHeaders(t *testing.T) {
	rcv := tracetest.StartWith(t, tracetest.Options{HeaderName: "authorization", HeaderValue: "Bearer s3cret"})
	if exportOne(t, rcv) || rcv.Refused() == 0 {
		t.Fatalf("without the header: spans accepted, %d exports refused", rcv.Refused())
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "authorization=Bearer%20s3cret,x-tenant=a")
			if !exportOne(t, rcv) {
				t.Fatalf("with %s: the span did not arrive (%d exports refused)", name, rcv.Refused())
			}
		})
	}
}

// TestExportOverTLSFromTheEnvironment: a TLS receiver gets the spans when
// OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE names its CA, and none over the default plaintext.
func TestExportOverTLSFromTheEnvironment(t *testing.T) {
	pki := testutil.NewPKI(t)
	rcv := tracetest.StartWith(t, tracetest.Options{TLS: pki.ServerConfig()})
	if exportOne(t, rcv) {
		t.Fatal("plaintext spans reached a TLS receiver")
	}
	ca, _, _ := pki.Files(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", ca)
	if !exportOne(t, rcv) {
		t.Fatal("with the receiver's CA in OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: no span arrived")
	}
}

// TestInsecureFromTheEnvironment: OTEL_EXPORTER_OTLP_INSECURE=true keeps plaintext even
// though it hands the transport to the environment.
func TestInsecureFromTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	if !exportOne(t, tracetest.Start(t)) {
		t.Fatal("OTEL_EXPORTER_OTLP_INSECURE=true: no span reached the plaintext receiver")
	}
}
