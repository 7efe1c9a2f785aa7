package mesh

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
	"github.com/smg-go/smg/mesh/wire"
)

// The gRPC service, written out as protoc would generate it from:
//
//	service Mesh {
//	  rpc Ping(Ping) returns (Ack);
//	  rpc PingReq(PingReq) returns (Ack);
//	  rpc Sync(stream Sync) returns (stream Sync);
//	}
//
// with messages encoded by package wire instead of protobuf.
const serviceName = "smg.mesh.v1.Mesh"

// meshService is the descriptor's handler type.
type meshService interface{ handler() Handler }

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*meshService)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Ping", Handler: pingHandler},
		{MethodName: "PingReq", Handler: pingReqHandler},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Sync", Handler: syncHandler, ServerStreams: true, ClientStreams: true},
	},
}

// unaryHandler is the handler of a unary method taking In: it decodes the request, rejects
// (and counts) one that does not decode or that complete finds lacking the fields the method
// needs, with the status message incomplete, and hands the rest to handle.
func unaryHandler[In any](complete func(*In) bool, incomplete string, handle func(Handler, context.Context, *In) *wire.Ack) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		t := srv.(*GRPCTransport)
		in := new(In)
		if err := dec(in); err != nil {
			t.rejected.Inc()
			return nil, err
		}
		if !complete(in) {
			t.rejected.Inc()
			return nil, status.Error(codes.InvalidArgument, incomplete)
		}
		return handle(t.handler(), ctx, in), nil
	}
}

var (
	pingHandler = unaryHandler(func(in *wire.Ping) bool { return in.From != "" },
		"mesh ping without sender", Handler.HandlePing)
	pingReqHandler = unaryHandler(func(in *wire.PingReq) bool { return in.From != "" && in.Target.Addr != "" },
		"mesh ping-req without sender or target", Handler.HandlePingReq)
)

func syncHandler(srv any, ss grpc.ServerStream) error {
	t := srv.(*GRPCTransport)
	ctx, cancel := context.WithCancel(ss.Context())
	s := newGRPCStream(t, ss, cancel, t.handler())
	s.run(ctx)
	return nil
}

// GRPCTransport is the production Transport: one gRPC server on the mesh port and one
// client connection per peer address, with the spec's timing (connect 5 s, redial backoff
// 1 s doubling to 60 s) and optional mutual TLS.
type GRPCTransport struct {
	codec    *wire.Codec
	server   *grpc.Server
	creds    credentials.TransportCredentials
	rejected *metrics.Counter
	dialOpts []grpc.DialOption
	refusals *refusalLog

	mu    sync.Mutex
	h     Handler
	conns map[string]*grpc.ClientConn
	ctx   context.Context
	stop  context.CancelFunc
}

// DefaultRefusalLogInterval is how often a refused TLS handshake is logged for one remote IP:
// a router outside the CA redials with backoff (up to 60 s), a scanner may not.
const DefaultRefusalLogInterval = time.Minute

// NewGRPCTransport returns a transport with cfg's settings (MaxMessage, ConnectTimeout,
// BackoffBase, BackoffMax, RefusalLogInterval), mutual TLS when tlsConfig is set (see
// LoadMutualTLS), and deps' Metrics, Logger (the refused TLS handshakes) and Clock (the
// refusal log's rate limit). Serve starts its server.
func NewGRPCTransport(cfg Config, tlsConfig *tls.Config, deps Deps) (*GRPCTransport, error) {
	if err := cfg.validateProtocol(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	t := &GRPCTransport{
		codec:    wire.NewCodec(wire.Limits{MaxMessage: cfg.MaxMessage}),
		rejected: deps.Metrics.GetOrCreateCounter(`smg_mesh_rejected_messages_total`),
		conns:    map[string]*grpc.ClientConn{},
		creds:    insecure.NewCredentials(),
	}
	if tlsConfig != nil {
		t.creds = credentials.NewTLS(tlsConfig)
	}
	serverCreds := t.creds
	if tlsConfig != nil {
		t.refusals = &refusalLog{
			log: deps.Logger, every: cfg.RefusalLogInterval, clock: deps.Clock, last: map[string]*refusals{},
			count: deps.Metrics.GetOrCreateCounter(`smg_mesh_rejected_connections_total{reason="tls"}`),
		}
		serverCreds = refusalCreds{t.creds, t.refusals}
	}
	t.ctx, t.stop = context.WithCancel(context.Background())
	t.server = grpc.NewServer(
		grpc.Creds(serverCreds),
		grpc.ForceServerCodecV2(t.codec),
		// gRPC refuses what is far over the limit before buffering it; the codec refuses
		// the rest, so both are counted by the handlers.
		grpc.MaxRecvMsgSize(2*cfg.MaxMessage),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 20 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	t.server.RegisterService(&serviceDesc, t)
	t.dialOpts = []grpc.DialOption{
		grpc.WithTransportCredentials(t.creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.BackoffBase, Multiplier: 2, Jitter: 0.2, MaxDelay: cfg.BackoffMax},
			MinConnectTimeout: cfg.ConnectTimeout,
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(t.codec), grpc.MaxCallRecvMsgSize(2*cfg.MaxMessage)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	}
	return t, nil
}

func (t *GRPCTransport) handler() Handler {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h
}

// SetHandler sets the receiver of inbound calls; call it before Serve.
func (t *GRPCTransport) SetHandler(h Handler) {
	t.mu.Lock()
	t.h = h
	t.mu.Unlock()
}

// Serve serves the mesh on l until Close.
func (t *GRPCTransport) Serve(l net.Listener) error {
	err := t.server.Serve(l)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Close stops the server and closes every client connection.
func (t *GRPCTransport) Close() {
	t.stop()
	t.server.Stop()
	t.mu.Lock()
	for a, c := range t.conns {
		_ = c.Close()
		delete(t.conns, a)
	}
	t.mu.Unlock()
}

func (t *GRPCTransport) conn(addr string) (*grpc.ClientConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.conns[addr]; c != nil {
		return c, nil
	}
	if t.ctx.Err() != nil {
		// Closed: a round still running must not open a connection Close will never see.
		return nil, fmt.Errorf("cannot dial mesh peer %s: %w", addr, ErrTransportClosed)
	}
	c, err := grpc.NewClient(addr, t.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("cannot dial mesh peer %s: %w", addr, err)
	}
	t.conns[addr] = c
	return c, nil
}

// Ping implements Transport.
func (t *GRPCTransport) Ping(ctx context.Context, addr string, m *wire.Ping) (*wire.Ack, error) {
	return t.ack(ctx, addr, "/"+serviceName+"/Ping", m)
}

// PingReq implements Transport.
func (t *GRPCTransport) PingReq(ctx context.Context, addr string, m *wire.PingReq) (*wire.Ack, error) {
	return t.ack(ctx, addr, "/"+serviceName+"/PingReq", m)
}

// ack calls method (its full name) at addr with m and returns the peer's Ack.
func (t *GRPCTransport) ack(ctx context.Context, addr, method string, m any) (*wire.Ack, error) {
	c, err := t.conn(addr)
	if err != nil {
		return nil, err
	}
	out := new(wire.Ack)
	if err := c.Invoke(ctx, method, m, out); err != nil {
		return nil, err
	}
	return out, nil
}

// OpenSync implements Transport. The stream lives until either side closes it or the
// transport closes; ctx bounds only its opening.
func (t *GRPCTransport) OpenSync(ctx context.Context, addr string, h Handler) (Stream, error) {
	c, err := t.conn(addr)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(t.ctx)
	// Opening waits for the connection at most until ctx's deadline; after that the stream
	// lives on the transport's context.
	stop := context.AfterFunc(ctx, cancel)
	cs, err := c.NewStream(sctx, &serviceDesc.Streams[0], "/"+serviceName+"/Sync", grpc.WaitForReady(true))
	if !stop() || err != nil {
		if err == nil {
			err = ctx.Err()
		}
		cancel()
		return nil, err
	}
	s := newGRPCStream(t, cs, cancel, h)
	go s.run(sctx)
	return s, nil
}

// grpcStream adapts a gRPC stream (client or server side) to Stream: Send queues without
// blocking; one goroutine writes, the caller of run reads.
type grpcStream struct {
	t  *GRPCTransport
	gs interface {
		SendMsg(any) error
		RecvMsg(any) error
	}
	cancel context.CancelFunc
	h      Handler
	out    chan *wire.Sync

	once   sync.Once
	closed chan struct{}
}

// streamQueue is how many messages a stream holds before Send reports ErrStreamBusy: a round
// queues at most one, plus acks and repair pages.
const streamQueue = 16

func newGRPCStream(t *GRPCTransport, gs interface {
	SendMsg(any) error
	RecvMsg(any) error
}, cancel context.CancelFunc, h Handler) *grpcStream {
	return &grpcStream{t: t, gs: gs, cancel: cancel, h: h, out: make(chan *wire.Sync, streamQueue), closed: make(chan struct{})}
}

func (s *grpcStream) Send(m *wire.Sync) error {
	select {
	case <-s.closed:
		return ErrStreamClosed
	default:
	}
	select {
	case s.out <- m:
		return nil
	default:
		return ErrStreamBusy
	}
}

func (s *grpcStream) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.cancel()
	})
}

// run writes queued messages on a goroutine and reads on the caller's until the stream ends,
// then reports StreamClosed once.
func (s *grpcStream) run(ctx context.Context) {
	go func() {
		for {
			select {
			case <-s.closed:
				if cs, ok := s.gs.(grpc.ClientStream); ok {
					_ = cs.CloseSend()
				}
				return
			case m := <-s.out:
				if err := s.gs.SendMsg(m); err != nil {
					s.Close()
					return
				}
			}
		}
	}()
	for {
		m := new(wire.Sync)
		if err := s.gs.RecvMsg(m); err != nil {
			if rejectedError(err) {
				s.t.rejected.Inc()
			}
			break
		}
		if ctx.Err() != nil {
			break
		}
		s.h.StreamMessage(s, m)
	}
	s.Close()
	s.h.StreamClosed(s)
}

// rejectedError reports whether a receive failed because the message was malformed or too
// large (as opposed to the stream ending).
func rejectedError(err error) bool {
	if errors.Is(err, io.EOF) {
		return false
	}
	if errors.Is(err, wire.ErrMalformed) || errors.Is(err, wire.ErrTooLarge) {
		return true
	}
	st, _ := status.FromError(err)
	return st.Code() == codes.ResourceExhausted || strings.Contains(st.Message(), "mesh message")
}

// refusalCreds are the server's TLS credentials, which report every refused handshake: gRPC
// only logs them through its own logger, so the refusing router would otherwise say nothing
// of a router outside the CA knocking (the dialling router's log shows the refusal).
type refusalCreds struct {
	credentials.TransportCredentials
	log *refusalLog
}

func (c refusalCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.log.refused(conn.RemoteAddr(), err)
	}
	return out, info, err
}

func (c refusalCreds) Clone() credentials.TransportCredentials {
	return refusalCreds{c.TransportCredentials.Clone(), c.log}
}

// refusalLog counts refused TLS handshakes (smg_mesh_rejected_connections_total{reason="tls"})
// and logs them at warn, at most once per remote IP per interval, with how many it did not
// log since: a router outside the CA redials for ever, and must not flood the log.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration
	clock clock.Clock
	count *metrics.Counter

	mu   sync.Mutex
	last map[string]*refusals // by remote IP
}

type refusals struct {
	logged     time.Time
	suppressed int
}

// maxRefusalHosts bounds the rate limiter's memory; past it, hosts not logged within the
// interval are forgotten.
const maxRefusalHosts = 4096

func (r *refusalLog) refused(remote net.Addr, err error) {
	// A connection closed before its first byte (a TCP health check or port scan) is no
	// refusal.
	if errors.Is(err, io.EOF) {
		return
	}
	r.count.Inc()
	addr, host := "", ""
	if remote != nil {
		addr, host = remote.String(), remote.String()
		if h, _, e := net.SplitHostPort(addr); e == nil {
			host = h
		}
	}
	now := r.clock.Now()
	r.mu.Lock()
	s := r.last[host]
	if s != nil && now.Sub(s.logged) < r.every {
		s.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := 0
	if s == nil {
		if len(r.last) >= maxRefusalHosts {
			for h, v := range r.last {
				if now.Sub(v.logged) >= r.every {
					delete(r.last, h)
				}
			}
		}
		s = &refusals{}
		r.last[host] = s
	}
	suppressed, s.logged, s.suppressed = s.suppressed, now, 0
	r.mu.Unlock()
	r.log.Warn("refused a mesh connection: TLS handshake failed", "remote", addr, "reason", err.Error(),
		"refused_since_last_log", suppressed)
}

// LoadMutualTLS builds the TLS configuration of --mesh-tls-cert, --mesh-tls-key and
// --mesh-tls-ca: this router presents its certificate, and both sides require the other's to
// chain to the CA. Peers are addressed by IP and named by the mesh, not by DNS, so the
// certificate's host names are not checked: holding a certificate the cluster's CA signed is
// what admits a router.
func LoadMutualTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load --mesh-tls-cert/--mesh-tls-key: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read --mesh-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cannot use --mesh-tls-ca %s: no PEM certificate in it", caFile)
	}
	return MutualTLSConfig(cert, pool), nil
}

// MutualTLSConfig is LoadMutualTLS for a certificate and CA pool already in memory.
func MutualTLSConfig(cert tls.Certificate, ca *x509.CertPool) *tls.Config {
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("mesh peer presented no certificate")
		}
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return fmt.Errorf("mesh peer certificate: %w", err)
			}
			certs = append(certs, c)
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return fmt.Errorf("mesh peer certificate not signed by the cluster CA: %w", err)
		}
		return nil
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS13,
		// The server requires a client certificate and checks it itself; the client checks
		// the server's chain itself (no host name check, see LoadMutualTLS).
		ClientAuth:            tls.RequireAnyClientCert,
		InsecureSkipVerify:    true, //nolint:gosec // verified by VerifyPeerCertificate against the CA
		VerifyPeerCertificate: verify,
	}
}
