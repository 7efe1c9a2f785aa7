package mesh

import (
	"context"
	"errors"

	"github.com/smg-go/smg/mesh/wire"
)

// Transport carries the mesh's messages between routers. The gRPC transport (grpc.go) is the
// production one; tests use an in-memory network with injected loss and partitions.
//
// Calls must honour ctx's deadline. A Transport delivers inbound calls to a Handler (the
// Node).
type Transport interface {
	// Ping sends a direct probe to addr and returns the answer.
	Ping(ctx context.Context, addr string, m *wire.Ping) (*wire.Ack, error)
	// PingReq asks the router at addr to probe m.Target for us.
	PingReq(ctx context.Context, addr string, m *wire.PingReq) (*wire.Ack, error)
	// OpenSync opens the pair's sync stream to addr. Messages the peer sends on it, and its
	// end, are delivered to h.
	OpenSync(ctx context.Context, addr string, h Handler) (Stream, error)
}

// Stream is one end of a pair's sync stream.
type Stream interface {
	// Send queues m without blocking; it returns ErrStreamBusy when the stream cannot take
	// more now (the spec's "a batch the stream cannot accept is dropped") and ErrStreamClosed
	// after the stream ended. The stream owns m after a successful Send.
	Send(m *wire.Sync) error
	// Close ends the stream; the Handler's StreamClosed follows.
	Close()
}

// Errors of Stream.Send.
var (
	ErrStreamBusy   = errors.New("mesh sync stream busy")
	ErrStreamClosed = errors.New("mesh sync stream closed")
)

// ErrTransportClosed is returned by a Transport's calls after its Close.
var ErrTransportClosed = errors.New("mesh transport closed")

// Handler receives what a Transport delivers. *Node implements it.
type Handler interface {
	HandlePing(ctx context.Context, m *wire.Ping) *wire.Ack
	HandlePingReq(ctx context.Context, m *wire.PingReq) *wire.Ack
	// StreamMessage delivers one message received on s, inbound or outbound.
	StreamMessage(s Stream, m *wire.Sync)
	// StreamClosed reports that s ended, either side having closed it or failed.
	StreamClosed(s Stream)
}
