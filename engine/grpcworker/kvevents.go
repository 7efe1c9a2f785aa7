package grpcworker

import (
	"context"

	"google.golang.org/grpc"

	"github.com/smg-go/smg/engine/commonpb"
)

// SubscribeKvEvents opens the engine's stream of KV-cache event batches (both engines serve
// the same messages); the stream lives until ctx ends or the engine closes it. It does not
// take one of the client's generate slots: it is one long call, not a request.
func (c *Client) SubscribeKvEvents(ctx context.Context, in *commonpb.SubscribeKvEventsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[commonpb.KvEventBatch], error) {
	if c.dialect == VLLM {
		return c.vllm().SubscribeKvEvents(ctx, in, opts...)
	}
	return c.sglang().SubscribeKvEvents(ctx, in, opts...)
}
