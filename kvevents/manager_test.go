package kvevents

import (
	"bytes"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/go-zeromq/zmq4"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/internal/testutil"
)

// TestManagerFollowsTheWorkers: a worker added with a ZMQ source gets a slot in its model's
// index and its blocks; removed, its slot, blocks and series go, and the model's index with
// its last worker. A gRPC worker without SubscribeKvEvents loses its slot by itself.
func TestManagerFollowsTheWorkers(t *testing.T) {
	cfg := DefaultManagerConfig()
	cfg.Metrics = metrics.NewSet()
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	defer p.close()
	zc := testZMQConfig(p.addrs())
	if err := m.AddZMQ("http://a", "m", zc); err != nil {
		t.Fatal(err)
	}
	if err := m.AddZMQ("http://a", "m", zc); err == nil {
		t.Fatal("the same worker was added twice")
	}
	idx := m.Index("m")
	if _, ok := idx.Slot("http://a"); !ok {
		t.Fatal("the worker has no slot")
	}
	p.waitSubscriber()
	ev := testEvent{Event: Event{Kind: Stored, BlockHashes: []uint64{9}, TokenIDs: []uint32{1, 2}, BlockSize: 2}}
	payload := encodeBatch(t, maps, 1, 0, []testEvent{ev})
	p.mu.Lock()
	p.buf[0] = payload
	p.mu.Unlock()
	if err := p.pub.Send(zmq4.NewMsgFrom(nil, make([]byte, 8), payload)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the worker's block", func() bool { return idx.Stats().Blocks == 1 })

	if err := m.AddGRPC("grpc://b", "m", serveFake(t, &sglangpb.UnimplementedSglangSchedulerServer{})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the gRPC worker without events losing its slot", func() bool {
		_, ok := idx.Slot("grpc://b")
		return !ok
	})

	m.Remove("http://a")
	m.Remove("grpc://b")
	if m.Index("m") != nil {
		t.Fatal("the model's index outlived its workers")
	}
	if _, ok := idx.Slot("http://a"); ok || idx.Stats().Blocks != 0 {
		t.Fatal("the removed worker kept its slot or blocks")
	}
	var out bytes.Buffer
	cfg.Metrics.WritePrometheus(&out)
	if out.Len() != 0 {
		t.Fatalf("series left:\n%s", out.String())
	}
}
