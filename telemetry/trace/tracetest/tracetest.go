// Package tracetest is an OTLP/gRPC trace receiver for tests: the real protocol (the
// collector's TraceService from the OTLP protos, over grpc-go on a loopback port), keeping
// every span it is sent.
package tracetest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Receiver is a running OTLP/gRPC trace receiver.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	addr string
	mu   sync.Mutex
	// spans holds every span received, with the service.name of its resource.
	spans   []Span
	arrived chan struct{} // signalled on every export
}

// Span is one received span and the service that sent it.
type Span struct {
	Service string
	*tracepb.Span
}

// Start serves a receiver on 127.0.0.1:0 until the test ends.
func Start(t testing.TB) *Receiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{addr: ln.Addr().String(), arrived: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

// Addr is the receiver's host:port.
func (r *Receiver) Addr() string { return r.addr }

// Export implements the OTLP TraceService.
func (r *Receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Service: service, Span: s})
			}
		}
	}
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// WaitSpan waits up to timeout for a span that match accepts and returns it; it fails the
// test, listing what arrived, when none did.
func (r *Receiver) WaitSpan(t testing.TB, timeout time.Duration, match func(Span) bool) Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		for _, s := range r.Spans() {
			if match(s) {
				return s
			}
		}
		select {
		case <-r.arrived:
		case <-deadline.C:
			var names []string
			for _, s := range r.Spans() {
				names = append(names, s.GetName())
			}
			t.Fatalf("no matching span reached the OTLP receiver in %v; received %v", timeout, names)
		}
	}
}

// Attr returns the value of the span's attribute key (nil when absent).
func (s Span) Attr(key string) *commonpb.AnyValue {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue()
		}
	}
	return nil
}

// Child returns the received span whose parent is s and whose name is name.
func (r *Receiver) Child(s Span, name string) (Span, bool) {
	for _, c := range r.Spans() {
		if c.GetName() == name && string(c.GetParentSpanId()) == string(s.GetSpanId()) {
			return c, true
		}
	}
	return Span{}, false
}
