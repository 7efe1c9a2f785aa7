package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Stats count a consumer's work since it started, over all its DP ranks.
type Stats struct {
	Received   uint64 // messages (or stream batches) received
	Applied    uint64 // batches handed to the sink, replayed ones included
	Dropped    uint64 // messages that did not parse or decode
	Gaps       uint64 // sequence gaps seen
	Replayed   uint64 // batches recovered from the replay socket
	Cleared    uint64 // times the worker's blocks were cleared (restart, unrecoverable gap)
	Reconnects uint64 // connections or streams that ended and were opened again
}

type counters struct {
	received, applied, dropped, gaps, replayed, cleared, reconnects atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{
		Received: c.received.Load(), Applied: c.applied.Load(), Dropped: c.dropped.Load(),
		Gaps: c.gaps.Load(), Replayed: c.replayed.Load(), Cleared: c.cleared.Load(),
		Reconnects: c.reconnects.Load(),
	}
}

var quiet = log.New(io.Discard, "", 0)

// ZMQConsumer subscribes to one worker's KV events over ZMQ, one goroutine per DP rank.
type ZMQConsumer struct {
	cfg    ZMQConfig
	ctr    counters
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartZMQ starts consuming; sink(r) is the Sink of rank r (ranks are separate caches with
// separate sequences). Close stops it.
func StartZMQ(cfg ZMQConfig, sink func(rank int) Sink) (*ZMQConsumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	registerTransport()
	ctx, cancel := context.WithCancel(context.Background())
	c := &ZMQConsumer{cfg: cfg, cancel: cancel}
	for r := range cfg.DPRanks {
		pub, err := RankEndpoint(cfg.Endpoint, r)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("cannot subscribe to KV events: %w", err)
		}
		rk := &rank{c: c, sink: sink(r), pub: pub, dec: NewDecoder()}
		if cfg.ReplayEndpoint != "" {
			if rk.replay, err = RankEndpoint(cfg.ReplayEndpoint, r); err != nil {
				cancel()
				return nil, fmt.Errorf("cannot subscribe to KV events: %w", err)
			}
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			rk.run(ctx)
		}()
	}
	return c, nil
}

// Close stops every rank and waits for their goroutines.
func (c *ZMQConsumer) Close() {
	c.cancel()
	c.wg.Wait()
}

// Stats returns the consumer's counters.
func (c *ZMQConsumer) Stats() Stats { return c.ctr.stats() }

// rank is the state of one DP rank's subscription, owned by its goroutine.
type rank struct {
	c           *ZMQConsumer
	sink        Sink
	pub, replay string // host:port
	dec         *Decoder
	batch       Batch
	last        uint64 // sequence of the last batch applied
	have        bool   // last is set
	// replayed is the first sequence of the batches a replay applied ahead of the live
	// stream (hasReplayed): the stream may still deliver them, and they are duplicates, not a
	// restart. Cleared once the stream delivers the last batch or the one after it, and on
	// every new connection.
	replayed    uint64
	hasReplayed bool
}

func (r *rank) run(ctx context.Context) {
	cfg := &r.c.cfg
	backoff := cfg.BackoffMin
	for ctx.Err() == nil {
		got := r.session(ctx)
		if ctx.Err() != nil {
			return
		}
		r.c.ctr.reconnects.Add(1)
		if got {
			backoff = cfg.BackoffMin
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, cfg.BackoffMax)
	}
}

// session dials the PUB socket and handles messages until the connection fails, stays idle
// for IdleTimeout, or ctx ends. It reports whether any message arrived.
func (r *rank) session(ctx context.Context) (got bool) {
	cfg := &r.c.cfg
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := zmq4.NewSub(sctx, zmq4.WithLogger(quiet), zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(cfg.HandshakeTimeout))
	defer sub.Close()
	idle := time.AfterFunc(cfg.IdleTimeout+cfg.HandshakeTimeout, cancel)
	defer idle.Stop()
	if err := sub.Dial(boundedEndpoint(r.pub, cfg.MaxMessageBytes, cfg.HandshakeTimeout)); err != nil {
		return false
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, cfg.Topic); err != nil {
		return false
	}
	r.hasReplayed = false // duplicates come only from this connection's replays
	r.catchUp(ctx)
	for {
		msg, err := sub.Recv()
		if err != nil {
			return got
		}
		idle.Reset(cfg.IdleTimeout)
		got = true
		r.handle(ctx, msg.Frames)
	}
}

// handle applies one published message, filling a gap before it from the replay socket.
func (r *rank) handle(ctx context.Context, frames [][]byte) {
	ctr := &r.c.ctr
	ctr.received.Add(1)
	_, seq, payload, err := ParseFrames(frames)
	if err != nil {
		ctr.dropped.Add(1)
		return
	}
	switch {
	case !r.have:
		// First message: what the engine published before it may still be in its replay
		// buffer (sequences start at 0 when the engine starts).
		if seq > 0 {
			r.fill(ctx, 0, seq, false)
		}
	case seq <= r.last && r.hasReplayed && seq >= r.replayed:
		if seq == r.last {
			r.hasReplayed = false // the live stream has caught up with the replays
		}
		return // a batch a replay already applied
	case seq <= r.last:
		// The publisher's sequence went back: the engine restarted with an empty cache.
		r.sink.Clear()
		ctr.cleared.Add(1)
		r.have = false
		if seq > 0 {
			r.fill(ctx, 0, seq, false)
		}
	case seq > r.last+1:
		ctr.gaps.Add(1)
		if r.fill(ctx, r.last+1, seq, true) != fillDone {
			r.sink.Clear()
			ctr.cleared.Add(1)
		}
	}
	if r.have && seq == r.last+1 {
		r.hasReplayed = false // the live stream has caught up with the replays
	}
	r.apply(seq, payload)
}

// catchUp replays, right after a (re)connection, what the engine published while we were not
// subscribed (from sequence 0 the first time): the batches before the subscription took
// effect would otherwise wait for the next batch to reveal the gap. Batches the buffer no
// longer holds after the last one applied leave the worker's state unknown: cleared.
func (r *rank) catchUp(ctx context.Context) {
	if r.replay == "" {
		return
	}
	from := uint64(0)
	if r.have {
		from = r.last + 1
	}
	if r.fill(ctx, from, endSeq, r.have) == fillGap {
		r.c.ctr.gaps.Add(1)
		r.sink.Clear()
		r.c.ctr.cleared.Add(1)
	}
}

// fillResult says how a replay ended.
type fillResult int

const (
	fillDone   fillResult = iota // every batch up to `to` applied
	fillEnd                      // the buffer ended first: nothing more was published
	fillGap                      // the buffer no longer holds the first batches wanted
	fillFailed                   // no replay socket, or it did not answer
)

func (r *rank) apply(seq uint64, payload []byte) {
	r.last, r.have = seq, true
	if err := r.dec.Decode(payload, &r.batch); err != nil {
		r.c.ctr.dropped.Add(1)
		return
	}
	r.sink.Apply(&r.batch)
	r.c.ctr.applied.Add(1)
}

// endSeq is the replay socket's end marker, sequence -1.
const endSeq = ^uint64(0)

// fill asks the replay socket for the batches [from, to) and applies them in order. Unless
// strict, it starts at the oldest batch the buffer still holds (the engine's state before we
// subscribed: better part than none).
func (r *rank) fill(ctx context.Context, from, to uint64, strict bool) fillResult {
	if r.replay == "" {
		return fillFailed
	}
	cfg := &r.c.cfg
	rctx, cancel := context.WithTimeout(ctx, cfg.ReplayTimeout)
	defer cancel()
	d := zmq4.NewDealer(rctx, zmq4.WithLogger(quiet), zmq4.WithDialerMaxRetries(0), zmq4.WithTimeout(cfg.ReplayTimeout))
	defer d.Close()
	if err := d.Dial(boundedEndpoint(r.replay, cfg.MaxMessageBytes, cfg.HandshakeTimeout)); err != nil {
		return fillFailed
	}
	req := binary.BigEndian.AppendUint64(nil, from)
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, req)); err != nil {
		return fillFailed
	}
	next := from
	for next < to {
		msg, err := d.Recv()
		if err != nil {
			return fillFailed
		}
		f := msg.Frames
		if len(f) == 3 && len(f[0]) == 0 {
			f = f[1:] // the delimiter the ROUTER echoes
		}
		if len(f) != 2 || len(f[0]) != SeqLen {
			r.c.ctr.dropped.Add(1)
			return fillFailed
		}
		seq := binary.BigEndian.Uint64(f[0])
		switch {
		case seq == endSeq:
			return fillEnd
		case seq < next:
			continue
		case seq > next && strict:
			return fillGap // the buffer no longer holds `next`
		case seq >= to:
			return fillDone
		}
		if !r.hasReplayed {
			r.replayed, r.hasReplayed = seq, true
		}
		r.apply(seq, f[1])
		r.c.ctr.replayed.Add(1)
		next = seq + 1
	}
	return fillDone
}
