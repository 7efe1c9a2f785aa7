package kvevents

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/go-zeromq/zmq4"

	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/internal/testutil"
)

// TestManagerFollowsTheWorkers: a worker added with a ZMQ source gets a slot in its model's
// index and its blocks; removed, its slot, blocks and series go, and the model's index with
// its last worker. A gRPC worker without SubscribeKvEvents loses its slot by itself, and the
// Manager says so.
func TestManagerFollowsTheWorkers(t *testing.T) {
	cfg := DefaultManagerConfig()
	cfg.Metrics = metrics.NewSet()
	var slotsChanged atomic.Int32
	cfg.OnSlotsChanged = func() { slotsChanged.Add(1) }
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

	if err := m.AddGRPC("grpc://b", "m", -1, serveFake(t, &sglangpb.UnimplementedSglangSchedulerServer{})); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the gRPC worker without events losing its slot", func() bool {
		_, ok := idx.Slot("grpc://b")
		return !ok
	})
	testutil.Eventually(t, "OnSlotsChanged after the slot left", func() bool { return slotsChanged.Load() == 1 })

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

// TestRankSinkPassesOneRank: a DP rank's worker applies its own rank's batches and those
// naming no rank, never another rank's.
func TestRankSinkPassesOneRank(t *testing.T) {
	var got []int
	rec := recordSink{apply: func(b *Batch) { got = append(got, int(b.Seq)) }}
	s := rankSink{rec, 1}
	s.Apply(&Batch{Seq: 1, DPRank: 0, HasDPRank: true})
	s.Apply(&Batch{Seq: 2, DPRank: 1, HasDPRank: true})
	s.Apply(&Batch{Seq: 3})
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("applied batches %v, want [2 3]", got)
	}
}

type recordSink struct{ apply func(*Batch) }

func (r recordSink) Apply(b *Batch) { r.apply(b) }
func (recordSink) Clear()           {}
