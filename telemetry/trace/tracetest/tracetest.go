// Package tracetest is an OTLP/gRPC trace receiver for tests: the real protocol (the
// collector's TraceService from the OTLP protos, over grpc-go on a loopback port), keeping
// every span it is sent.
package tracetest

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Receiver is a running OTLP/gRPC trace receiver.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	addr string
	mu   sync.Mutex
	// spans holds every span received, with the service.name of its resource.
	spans    []Span
	refused  int
	received int
	arrived  chan struct{} // signalled on every export
	opts     Options
}

// Span is one received span and the service that sent it.
type Span struct {
	Service string
	*tracepb.Span
}

// Start serves a plaintext receiver on 127.0.0.1:0 until the test ends.
func Start(t testing.TB) *Receiver { return StartWith(t, Options{}) }

// Options configure a receiver.
type Options struct {
	// TLS serves TLS with this configuration (nil: plaintext).
	TLS *tls.Config
	// HeaderName, when set, makes the receiver refuse (Unauthenticated) every export whose
	// metadata lacks HeaderName: HeaderValue, as a collector behind an authenticator does.
	HeaderName, HeaderValue string
	// CountOnly counts the spans received without keeping them (Received), for loads.
	CountOnly bool
}

// StartWith serves a receiver configured by o on 127.0.0.1:0 until the test ends.
func StartWith(t testing.TB, o Options) *Receiver {
	r, stop, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return r
}

// Listen serves a receiver configured by o on 127.0.0.1:0 until stop is called (for
// programs: the benchmarks export to it).
func Listen(o Options) (r *Receiver, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	r = &Receiver{addr: ln.Addr().String(), arrived: make(chan struct{}, 1), opts: o}
	var serverOpts []grpc.ServerOption
	if o.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	srv := grpc.NewServer(serverOpts...)
	collectorpb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	return r, srv.Stop, nil
}

// Received counts the spans received (kept or, with CountOnly, not).
func (r *Receiver) Received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received
}

// Refused counts the exports refused for a missing or wrong header.
func (r *Receiver) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// Addr is the receiver's host:port.
func (r *Receiver) Addr() string { return r.addr }

// Export implements the OTLP TraceService.
func (r *Receiver) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	if name := r.opts.HeaderName; name != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get(name); len(got) != 1 || got[0] != r.opts.HeaderValue {
			r.mu.Lock()
			r.refused++
			r.mu.Unlock()
			return nil, status.Errorf(codes.Unauthenticated, "header %s missing or wrong", name)
		}
	}
	r.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.received += len(ss.GetSpans())
			if r.opts.CountOnly {
				continue
			}
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
