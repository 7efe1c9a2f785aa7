package main

import (
	"testing"

	"github.com/smg-go/smg/worker"
)

// TestKVEventPortsEndpoints: a worker's own kv_events_endpoint wins; without one the
// fleet-wide ports apply on the worker's host (IPv6 in brackets); with neither, none.
func TestKVEventPortsEndpoints(t *testing.T) {
	reg, err := worker.NewRegistry(worker.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	add := func(spec worker.Spec) *worker.Worker {
		t.Helper()
		w, err := reg.Add(t.Context(), spec, worker.StatusReady)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	own := add(worker.Spec{URL: "http://10.0.0.1:8000", KVEventsEndpoint: "tcp://10.0.0.9:6000", KVEventsReplayEndpoint: "tcp://10.0.0.9:6001"})
	plain := add(worker.Spec{URL: "http://10.0.0.2:8000"})
	v6 := add(worker.Spec{URL: "http://[fd00::1]:8000"})
	tests := []struct {
		ports       kvEventPorts
		w           *worker.Worker
		pub, replay string
	}{
		{kvEventPorts{Pub: 5557, Replay: 5558}, own, "tcp://10.0.0.9:6000", "tcp://10.0.0.9:6001"},
		{kvEventPorts{Pub: 5557, Replay: 5558}, plain, "tcp://10.0.0.2:5557", "tcp://10.0.0.2:5558"},
		{kvEventPorts{Pub: 5557}, plain, "tcp://10.0.0.2:5557", ""},
		{kvEventPorts{Pub: 5557}, v6, "tcp://[fd00::1]:5557", ""},
		{kvEventPorts{}, plain, "", ""},
	}
	for _, tc := range tests {
		if pub, replay := tc.ports.endpoints(tc.w); pub != tc.pub || replay != tc.replay {
			t.Errorf("%+v on %s: %q %q, want %q %q", tc.ports, tc.w.URL, pub, replay, tc.pub, tc.replay)
		}
	}
}
