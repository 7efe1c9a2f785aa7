package main

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/kvevents"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/worker"
)

// kvEvents subscribes to the KV-cache events of the workers whose model cache_aware routes
// (spec: only cache_aware subscribes), from the registry: a gRPC worker on its engine
// connection, an HTTP worker with a kv_events_endpoint on the engine's ZMQ publisher. A
// worker added is followed before the pickers of its snapshot are built (it subscribes ahead
// of the router), a worker removed loses its blocks. cache_aware reads the engines'
// reported caches through EventIndex.
type kvEvents struct {
	m       *kvevents.Manager
	engines *engines
	wants   func(*worker.Worker) bool
	log     *slog.Logger
	// followed maps a followed worker's URL to its endpoints (blank for gRPC workers), so a
	// changed endpoint is followed afresh; only the registry's writer goroutine touches it.
	followed map[string]string
}

func newKVEvents(cfg kvevents.ManagerConfig, e *engines, wants func(*worker.Worker) bool, log *slog.Logger) (*kvEvents, error) {
	m, err := kvevents.NewManager(cfg)
	if err != nil {
		return nil, err
	}
	return &kvEvents{m: m, engines: e, wants: wants, log: log, followed: map[string]string{}}, nil
}

// sync follows the new workers of snap that publish events and drops the gone ones
// (Registry.Subscribe).
func (k *kvEvents) sync(snap *worker.Snapshot) {
	live := make(map[string]bool, len(k.followed))
	for _, w := range snap.Workers {
		spec := w.Spec()
		grpcWorker := w.Protocol() == worker.ProtocolGRPC
		if (!grpcWorker && spec.KVEventsEndpoint == "") || len(w.Models) == 0 || !k.wants(w) {
			continue
		}
		live[w.URL] = true
		source := spec.KVEventsEndpoint + " " + spec.KVEventsReplayEndpoint
		if was, ok := k.followed[w.URL]; ok {
			if was == source {
				continue
			}
			k.m.Remove(w.URL) // its endpoint changed (PUT, PATCH)
			delete(k.followed, w.URL)
		}
		// One model per engine: an engine serves the model it was started with.
		var err error
		if grpcWorker {
			err = k.m.AddGRPC(w.URL, w.Models[0], w.DPRank(), engineEvents{k.engines, w})
		} else {
			zc := kvevents.DefaultZMQConfig()
			zc.Endpoint, zc.ReplayEndpoint = spec.KVEventsEndpoint, spec.KVEventsReplayEndpoint
			err = k.m.AddZMQ(w.URL, w.Models[0], zc)
		}
		if err != nil {
			k.log.Warn("Cannot follow the worker's KV-cache events; its model routes on the approximate tree", "worker", w.URL, "error", err)
			continue
		}
		k.followed[w.URL] = source
	}
	for url := range k.followed {
		if !live[url] {
			k.m.Remove(url)
			delete(k.followed, url)
		}
	}
}

// EventIndex implements cacheaware.EventSource.
func (k *kvEvents) EventIndex(model string) cacheaware.EventIndex {
	if idx := k.m.Index(model); idx != nil {
		return idx
	}
	return nil // not a typed nil: the picker tests for none
}

// engineEvents subscribes on a worker's engine client, dialled when the consumer first asks.
type engineEvents struct {
	e *engines
	w *worker.Worker
}

func (s engineEvents) SubscribeKvEvents(ctx context.Context, in *commonpb.SubscribeKvEventsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[commonpb.KvEventBatch], error) {
	c, err := s.e.client(s.w)
	if err != nil {
		return nil, err
	}
	return c.SubscribeKvEvents(ctx, in, opts...)
}

// routesCacheAware reports whether w's model is routed by cache_aware: its "policy" label,
// else its PD leg's policy, else --policy.
func (o *options) routesCacheAware(w *worker.Worker) bool {
	p := w.Label(policy.LabelPolicy)
	if p == "" && o.pd.enabled {
		switch w.Type() {
		case "prefill":
			p = o.pd.legs.Prefill
		case "decode":
			p = o.pd.legs.Decode
		}
	}
	if p == "" {
		p = o.policy
	}
	return p == "cache_aware"
}
