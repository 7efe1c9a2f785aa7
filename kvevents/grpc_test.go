package kvevents

import (
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/commonpb"
	"github.com/smg-go/smg/engine/sglangpb"
	"github.com/smg-go/smg/internal/testutil"
)

// fakeScheduler serves SubscribeKvEvents from a script: each subscription takes the next
// step, which sends batches of the given sequences and then ends with err.
type fakeScheduler struct {
	sglangpb.UnimplementedSglangSchedulerServer
	mu     sync.Mutex
	steps  []step
	starts []uint64 // the start sequence of every subscription
	hold   chan struct{}
}

type step struct {
	seqs []uint64
	err  error
}

func (f *fakeScheduler) SubscribeKvEvents(req *commonpb.SubscribeKvEventsRequest, st grpc.ServerStreamingServer[commonpb.KvEventBatch]) error {
	f.mu.Lock()
	f.starts = append(f.starts, req.GetStartSequenceNumber())
	if len(f.steps) == 0 {
		f.mu.Unlock()
		select { // the script is over: hold the stream open until the client goes
		case <-st.Context().Done():
		case <-f.hold:
		}
		return nil
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	f.mu.Unlock()
	for _, seq := range s.seqs {
		parent := int64(7)
		b := &commonpb.KvEventBatch{SequenceNumber: seq, Events: []*commonpb.KvCacheEvent{
			{Data: &commonpb.KvCacheEvent_Removed{Removed: &commonpb.KvBlocksRemoved{BlockHashes: []int64{int64(seq)}}}},
			{Data: &commonpb.KvCacheEvent_Stored{Stored: &commonpb.KvBlocksStored{ParentBlockHash: &parent, Blocks: []*commonpb.KvBlock{
				{BlockHash: -1, TokenIds: []uint32{1, 2}, BlockSize: 2},
				{BlockHash: 3, TokenIds: []uint32{3, 4}, BlockSize: 2},
			}}}},
			{Data: &commonpb.KvCacheEvent_Cleared{Cleared: &commonpb.KvCacheCleared{}}},
		}}
		if err := st.Send(b); err != nil {
			return err
		}
	}
	return s.err
}

func serveFake(t *testing.T, srv sglangpb.SglangSchedulerServer) sglangpb.SglangSchedulerClient {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	sglangpb.RegisterSglangSchedulerServer(s, srv)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return sglangpb.NewSglangSchedulerClient(cc)
}

func testGRPCConfig() GRPCConfig {
	cfg := DefaultGRPCConfig()
	cfg.BackoffMin, cfg.BackoffMax = 1e6, 2e7
	return cfg
}

// TestGRPCResumeGapLossAndRestart walks the stream through its recoveries: a stream that
// ends is resubscribed from the last sequence; a gap inside a stream resubscribes from the
// last sequence (a duplicate of it is skipped); a fresh stream that still starts past the gap
// clears the worker; DataLoss clears it and subscribes from the start; a fresh stream from
// before the last sequence is a restarted engine (cleared).
func TestGRPCResumeGapLossAndRestart(t *testing.T) {
	f := &fakeScheduler{hold: make(chan struct{}), steps: []step{
		{seqs: []uint64{1, 2}, err: status.Error(codes.Unavailable, "engine going away")},
		{seqs: []uint64{3, 5}},    // gap after 3: resubscribe from 3
		{seqs: []uint64{3, 4, 5}}, // the replay, with a duplicate of 3
		{seqs: []uint64{6, 9}},    // gap after 6
		{seqs: []uint64{9}},       // cannot replay 7..8: cleared, 9 applied
		{err: status.Error(codes.DataLoss, "replay buffer lost")}, // cleared, from 0
		{seqs: []uint64{2}}, // from 0: applied as it comes
		{seqs: []uint64{1}}, // asked after 2, answered 1: a restarted engine
	}}
	rec := &recorder{}
	c, err := StartGRPC(testGRPCConfig(), serveFake(t, f), rec)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{1, 2, 3, 4, 5, 6, clearMark, 9, clearMark, 2, clearMark, 1}
	testutil.Eventually(t, "the scripted stream", func() bool {
		f.mu.Lock()
		done := len(f.steps) == 0 && len(f.starts) == 9
		f.mu.Unlock()
		got, _ := rec.snapshot()
		return done && slices.Equal(got, want)
	})
	c.Close()
	close(f.hold)
	f.mu.Lock()
	defer f.mu.Unlock()
	if wantStarts := []uint64{0, 2, 3, 5, 6, 9, 0, 2, 1}; !slices.Equal(f.starts, wantStarts) {
		t.Fatalf("subscriptions started at %v, want %v", f.starts, wantStarts)
	}
	if st := c.Stats(); st.Gaps != 3 || st.Cleared != 3 {
		t.Fatalf("stats %+v", st)
	}
	if c.Err() != nil {
		t.Fatalf("Err after Close: %v", c.Err())
	}
}

// TestGRPCUnimplementedStops: a worker without SubscribeKvEvents publishes no events.
func TestGRPCUnimplementedStops(t *testing.T) {
	c, err := StartGRPC(testGRPCConfig(), serveFake(t, &sglangpb.UnimplementedSglangSchedulerServer{}), &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if c.Err() != ErrNoEvents {
		t.Fatalf("Err %v, want ErrNoEvents", c.Err())
	}
	c.Close()
}

// TestGRPCConvertsBlocks: a stored event's blocks become one event with their hashes and
// tokens in order and the parent; negative hashes keep their 64 bits.
func TestGRPCConvertsBlocks(t *testing.T) {
	var c GRPCConsumer
	lvl := int32(1)
	parent := int64(-9)
	c.convert(&commonpb.KvEventBatch{SequenceNumber: 4, Timestamp: 1.5, Events: []*commonpb.KvCacheEvent{
		{Data: &commonpb.KvCacheEvent_Stored{Stored: &commonpb.KvBlocksStored{ParentBlockHash: &parent, Blocks: []*commonpb.KvBlock{
			{BlockHash: -1, TokenIds: []uint32{1, 2}, BlockSize: 2, CacheLevel: &lvl},
			{BlockHash: 3, TokenIds: []uint32{3, 4}, BlockSize: 2},
		}}}},
		{Data: &commonpb.KvCacheEvent_Removed{Removed: &commonpb.KvBlocksRemoved{BlockHashes: []int64{-1}}}},
	}})
	b := &c.batch
	if b.Seq != 4 || b.TS != 1.5 || len(b.Events) != 2 {
		t.Fatalf("batch %+v", b)
	}
	st := b.Events[0]
	if st.Kind != Stored || !slices.Equal(st.BlockHashes, []uint64{^uint64(0), 3}) || !slices.Equal(st.TokenIDs, []uint32{1, 2, 3, 4}) ||
		st.BlockSize != 2 || !st.HasParent || st.ParentHash != ^uint64(8) || st.Medium != "L1" {
		t.Fatalf("stored %+v", st)
	}
	if rm := b.Events[1]; rm.Kind != Removed || rm.BlockHashes[0] != ^uint64(0) {
		t.Fatalf("removed %+v", rm)
	}
}
