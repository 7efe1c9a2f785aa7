package kvevents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/commonpb"
)

// Subscriber is the engine client's one method the gRPC consumer needs; both engines'
// generated clients (engine/sglangpb, engine/vllmpb) have it.
type Subscriber interface {
	SubscribeKvEvents(ctx context.Context, in *commonpb.SubscribeKvEventsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[commonpb.KvEventBatch], error)
}

// GRPCConfig configures the gRPC consumer of one worker.
type GRPCConfig struct {
	// BackoffMin and BackoffMax bound the wait between failed subscriptions; it doubles from
	// Min to Max and returns to Min once a batch arrives. Defaults 100 ms and 10 s.
	BackoffMin, BackoffMax time.Duration
}

// DefaultGRPCConfig returns the defaults.
func DefaultGRPCConfig() GRPCConfig {
	return GRPCConfig{BackoffMin: 100 * time.Millisecond, BackoffMax: 10 * time.Second}
}

// Validate reports every problem in c, each saying how to fix it.
func (c GRPCConfig) Validate() error {
	if c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin {
		return fmt.Errorf("kv events backoff %v..%v: use 0 < min <= max (defaults 100ms..10s)", c.BackoffMin, c.BackoffMax)
	}
	return nil
}

// ErrNoEvents: the worker does not implement SubscribeKvEvents; the consumer has stopped.
var ErrNoEvents = errors.New("the worker publishes no KV events (SubscribeKvEvents is unimplemented)")

// GRPCConsumer follows one worker's SubscribeKvEvents stream.
type GRPCConsumer struct {
	cfg    GRPCConfig
	client Subscriber
	sink   Sink
	ctr    counters
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error

	batch Batch
	last  uint64
	have  bool
}

// StartGRPC starts consuming; Close stops it.
func StartGRPC(cfg GRPCConfig, client Subscriber, sink Sink) (*GRPCConsumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &GRPCConsumer{cfg: cfg, client: client, sink: sink, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := c.run(ctx)
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}()
	return c, nil
}

// Close stops the consumer and waits for its goroutine.
func (c *GRPCConsumer) Close() {
	c.cancel()
	<-c.done
}

// Done is closed when the consumer has stopped: Close, or the worker publishes no events
// (Err is then ErrNoEvents).
func (c *GRPCConsumer) Done() <-chan struct{} { return c.done }

// Err returns why the consumer stopped on its own, nil while it runs or after Close.
func (c *GRPCConsumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Stats returns the consumer's counters.
func (c *GRPCConsumer) Stats() Stats { return c.ctr.stats() }

// streamEnd says why a stream ended.
type streamEnd int

const (
	endFailed  streamEnd = iota // an error or a clean end: resubscribe after a backoff
	endGap                      // a gap: resubscribe from the last batch at once
	endLost                     // the engine cannot replay: cleared, subscribe afresh at once
	endNoEvent                  // Unimplemented
)

func (c *GRPCConsumer) run(ctx context.Context) error {
	backoff := c.cfg.BackoffMin
	for ctx.Err() == nil {
		end, got := c.stream(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case end == endNoEvent:
			return ErrNoEvents
		}
		c.ctr.reconnects.Add(1)
		if got {
			backoff = c.cfg.BackoffMin
		}
		if end == endGap || end == endLost {
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.BackoffMax)
	}
	return nil
}

func (c *GRPCConsumer) stream(ctx context.Context) (end streamEnd, got bool) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := &commonpb.SubscribeKvEventsRequest{}
	if c.have {
		req.StartSequenceNumber = c.last
	}
	st, err := c.client.SubscribeKvEvents(sctx, req)
	if err != nil {
		return c.classify(err), false
	}
	first := true
	for {
		pb, err := st.Recv()
		if err != nil {
			return c.classify(err), got
		}
		got = true
		c.ctr.received.Add(1)
		seq := pb.GetSequenceNumber()
		if c.have {
			switch {
			case seq < c.last && first:
				// Asked for batches after last, the engine answered from before it: it
				// restarted, and its cache with it.
				c.sink.Clear()
				c.ctr.cleared.Add(1)
			case seq <= c.last:
				continue // a duplicate (a replay may resend the batch it starts after)
			case seq > c.last+1 && !first:
				c.ctr.gaps.Add(1)
				return endGap, got
			case seq > c.last+1:
				// A fresh stream still starts past the gap: the engine cannot replay it.
				c.ctr.gaps.Add(1)
				c.sink.Clear()
				c.ctr.cleared.Add(1)
			}
		}
		first = false
		c.convert(pb)
		c.sink.Apply(&c.batch)
		c.ctr.applied.Add(1)
		c.last, c.have = seq, true
	}
}

// classify maps a subscription's error to what happens next.
func (c *GRPCConsumer) classify(err error) streamEnd {
	switch status.Code(err) {
	case codes.Unimplemented:
		return endNoEvent
	case codes.OutOfRange, codes.DataLoss:
		c.sink.Clear()
		c.ctr.cleared.Add(1)
		c.have, c.last = false, 0
		return endLost
	}
	return endFailed
}

// convert fills c.batch from a stream batch: a stored event's blocks become one Event with
// their hashes and tokens concatenated, as the ZMQ encoding has them.
func (c *GRPCConsumer) convert(pb *commonpb.KvEventBatch) {
	b := &c.batch
	b.reset()
	b.Seq, b.TS = pb.GetSequenceNumber(), pb.GetTimestamp()
	if pb.DpRank != nil {
		b.DPRank, b.HasDPRank = int(pb.GetDpRank()), true
	}
	for _, ev := range pb.GetEvents() {
		switch d := ev.GetData().(type) {
		case *commonpb.KvCacheEvent_Stored:
			e := b.next()
			e.Kind = Stored
			if p := d.Stored.ParentBlockHash; p != nil {
				e.ParentHash, e.HasParent = uint64(*p), true
			}
			for i, blk := range d.Stored.GetBlocks() {
				e.BlockHashes = append(e.BlockHashes, uint64(blk.GetBlockHash()))
				e.TokenIDs = append(e.TokenIDs, blk.GetTokenIds()...)
				if i == 0 {
					e.BlockSize = int(blk.GetBlockSize())
				} else if int(blk.GetBlockSize()) != e.BlockSize {
					e.BlockSize = -1 // mixed sizes: the index refuses the event
				}
				if blk.LoraId != nil {
					e.LoraID, e.HasLora = blk.GetLoraId(), true
				}
				if blk.CacheLevel != nil {
					e.Medium = cacheLevel(blk.GetCacheLevel())
				}
			}
		case *commonpb.KvCacheEvent_Removed:
			e := b.next()
			e.Kind = Removed
			for _, h := range d.Removed.GetBlockHashes() {
				e.BlockHashes = append(e.BlockHashes, uint64(h))
			}
			if d.Removed.CacheLevel != nil {
				e.Medium = cacheLevel(d.Removed.GetCacheLevel())
			}
		case *commonpb.KvCacheEvent_Cleared:
			b.next().Kind = Cleared
		}
	}
}

func cacheLevel(l int32) string {
	switch l {
	case 0:
		return "L0"
	case 1:
		return "L1"
	case 2:
		return "L2"
	}
	return "L" + strconv.Itoa(int(l))
}
