package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"

	"google.golang.org/grpc"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/kvevents"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/worker"
)

// kvEvents subscribes to the KV-cache events of the workers whose model cache_aware routes
// (spec: only cache_aware subscribes), from the registry: a gRPC worker on its engine
// connection, an HTTP worker with a kv_events_endpoint (or, with --kv-events-port, every HTTP
// worker) on the engine's ZMQ publisher. A
// worker added is followed before the pickers of its snapshot are built (it subscribes ahead
// of the router), a worker removed loses its blocks. cache_aware reads the engines'
// reported caches through EventIndex.
type kvEvents struct {
	m       *kvevents.Manager
	engines *engines
	wants   func(*worker.Worker) bool
	fleet   kvEventPorts
	log     *slog.Logger
	// followed maps a followed worker's URL to its endpoints (blank for gRPC workers), so a
	// changed endpoint is followed afresh; only the registry's writer goroutine touches it.
	followed map[string]string
}

func newKVEvents(cfg kvevents.ManagerConfig, e *engines, wants func(*worker.Worker) bool, fleet kvEventPorts, log *slog.Logger) (*kvEvents, error) {
	m, err := kvevents.NewManager(cfg)
	if err != nil {
		return nil, err
	}
	return &kvEvents{m: m, engines: e, wants: wants, fleet: fleet, log: log, followed: map[string]string{}}, nil
}

// kvEventPorts are the fleet-wide ports of the HTTP engines' KV-cache event sockets
// (--kv-events-port, --kv-events-replay-port), 0 for none: the engines of a fleet are
// usually started with one --kv-events-config, so every engine publishes on the same port of
// its own host.
type kvEventPorts struct {
	Pub, Replay int
	// DPSize is the data-parallel ranks behind each HTTP worker (--kv-events-dp-size): rank
	// r publishes on the ports + r, as vLLM and SGLang offset them. Default 1.
	DPSize int
}

func (p kvEventPorts) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"--kv-events-port", p.Pub}, {"--kv-events-replay-port", p.Replay}} {
		if f.v < 0 || f.v > 65535 {
			return fmt.Errorf("%s %d: give the engines' port, 1-65535 (0: none)", f.name, f.v)
		}
	}
	if p.DPSize < 1 || p.DPSize > 1024 {
		return fmt.Errorf("--kv-events-dp-size %d: give the engines' data-parallel size, 1-1024", p.DPSize)
	}
	if p.Replay != 0 && p.Pub == 0 {
		return errors.New("--kv-events-replay-port needs --kv-events-port: the replay socket completes a subscription to the publisher")
	}
	return nil
}

// endpoints returns the KV-cache event sockets of HTTP worker w: its own kv_events_endpoint
// (and replay endpoint) when it names one, else the fleet-wide ports on its host, else none.
func (p kvEventPorts) endpoints(w *worker.Worker) (pub, replay string) {
	if pub, replay = w.KVEventsEndpoints(); pub != "" || p.Pub == 0 {
		return pub, replay
	}
	u, err := url.Parse(w.URL)
	if err != nil || u.Hostname() == "" {
		return "", ""
	}
	pub = "tcp://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(p.Pub))
	if p.Replay != 0 {
		replay = "tcp://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(p.Replay))
	}
	return pub, replay
}

// sync follows the new workers of snap that publish events and drops the gone ones
// (Registry.Subscribe).
func (k *kvEvents) sync(snap *worker.Snapshot) {
	live := make(map[string]bool, len(k.followed))
	for _, w := range snap.Workers {
		grpcWorker := w.Protocol() == worker.ProtocolGRPC
		var pub, replay string
		if !grpcWorker {
			pub, replay = k.fleet.endpoints(w)
		}
		if (!grpcWorker && pub == "") || len(w.Models) == 0 || !k.wants(w) {
			continue
		}
		live[w.URL] = true
		source := pub + " " + replay
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
			zc.Endpoint, zc.ReplayEndpoint, zc.DPRanks = pub, replay, max(1, k.fleet.DPSize)
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
