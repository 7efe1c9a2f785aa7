package mockworker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/smg-go/smg/engine/commonpb"
)

// The KV-cache events of an engine-mode worker (Config.KVEvents), published as vLLM and SGLang
// publish theirs: on a ZMQ PUB socket, frames [topic "", 8-byte big-endian sequence, msgpack
// batch], with a ROUTER socket that replays the last KVEventsReplay batches, and (Protocol
// grpc) on SubscribeKvEvents. The mock encodes the events itself, as an engine does; it shares
// no code with the gateway's decoder.

// KVEncoding is the msgpack shape of the published batches.
type KVEncoding string

const (
	// KVEncodingMap is newer vLLM's: tagged maps ({"type": "BlockStored", ...}).
	KVEncodingMap KVEncoding = "map"
	// KVEncodingArray is SGLang's (and older vLLM's): tagged arrays (["BlockStored", ...]).
	KVEncodingArray KVEncoding = "array"
)

// DefaultKVEventsReplay is vLLM's and SGLang's buffer_steps default.
const DefaultKVEventsReplay = 10000

type kvKind uint8

const (
	kvStored kvKind = iota + 1
	kvRemoved
	kvCleared
)

// kvEvent is one block's change in the mock's cache, recorded under the engine's lock.
type kvEvent struct {
	kind      kvKind
	hash      uint64
	parent    uint64
	hasParent bool
	tokens    []uint32 // kvStored: the block's tokens (a view of the sequence's, immutable)
}

// kvBatch is one published batch, kept in the replay ring.
type kvBatch struct {
	seq     uint64
	ts      float64
	events  []kvEvent
	payload []byte // the msgpack encoding
}

// kvSub is one SubscribeKvEvents stream.
type kvSub struct {
	ch chan *kvBatch
}

// kvPublisher publishes one worker's events. publish is called by the engine goroutine only;
// the ROUTER goroutine and gRPC streams read the ring under mu.
type kvPublisher struct {
	enc       KVEncoding
	blockSize int
	pub       zmq4.Socket
	router    zmq4.Socket
	pubAddr   string
	replayAdr string

	mu   sync.Mutex
	next uint64
	ring []*kvBatch // oldest first, at most size
	size int
	drop int // the next batches to keep off the PUB stream (a fault)
	subs map[*kvSub]struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup
	buf    bytes.Buffer
	enco   *msgpack.Encoder
}

var quietZMQ = log.New(io.Discard, "", 0)

// startKVPublisher binds worker i's PUB socket on host:pubPort and its replay ROUTER on
// host:replayPort (0: free ports).
func startKVPublisher(cfg *Config, host string, pubPort, replayPort int) (*kvPublisher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &kvPublisher{enc: cfg.KVEventsEncoding, blockSize: cfg.BlockSize, size: cfg.KVEventsReplay, subs: map[*kvSub]struct{}{}, cancel: cancel}
	p.enco = msgpack.NewEncoder(&p.buf)
	p.pub = zmq4.NewPub(ctx, zmq4.WithLogger(quietZMQ))
	if err := p.pub.Listen("tcp://" + net.JoinHostPort(host, strconv.Itoa(pubPort))); err != nil {
		cancel()
		p.pub.Close()
		return nil, fmt.Errorf("cannot listen for KV events (--kv-events-port): %w", err)
	}
	p.router = zmq4.NewRouter(ctx, zmq4.WithLogger(quietZMQ))
	if err := p.router.Listen("tcp://" + net.JoinHostPort(host, strconv.Itoa(replayPort))); err != nil {
		cancel()
		p.pub.Close()
		p.router.Close()
		return nil, fmt.Errorf("cannot listen for KV event replays (--kv-events-port + count): %w", err)
	}
	p.pubAddr, p.replayAdr = p.pub.Addr().String(), p.router.Addr().String()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.serveReplay()
	}()
	return p, nil
}

func (p *kvPublisher) close() {
	p.cancel()
	p.pub.Close()
	p.router.Close()
	p.wg.Wait()
	p.mu.Lock()
	for s := range p.subs {
		close(s.ch)
		delete(p.subs, s)
	}
	p.mu.Unlock()
}

// serveReplay answers replay requests [identity, "", start] with every buffered batch from
// start, [identity, "", seq, payload], then the end marker [identity, "", -1, ""].
func (p *kvPublisher) serveReplay() {
	for {
		msg, err := p.router.Recv()
		if err != nil {
			return
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue // vLLM logs and ignores a malformed request
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		p.mu.Lock()
		var out []*kvBatch
		for _, b := range p.ring {
			if b.seq >= start {
				out = append(out, b)
			}
		}
		p.mu.Unlock()
		for _, b := range out {
			if p.router.SendMulti(zmq4.NewMsgFrom(id, nil, seqBytes(b.seq), b.payload)) != nil {
				break
			}
		}
		_ = p.router.SendMulti(zmq4.NewMsgFrom(id, nil, seqBytes(^uint64(0)), nil))
	}
}

func seqBytes(s uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), s) }

// publish sends one step's events as one batch. Called by the engine goroutine only.
func (p *kvPublisher) publish(evs []kvEvent) {
	if len(evs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := &kvBatch{seq: p.next, ts: float64(time.Now().UnixNano()) / 1e9, events: append([]kvEvent(nil), evs...)}
	p.next++
	b.payload = p.encode(b)
	if len(p.ring) == p.size {
		copy(p.ring, p.ring[1:])
		p.ring = p.ring[:len(p.ring)-1]
	}
	p.ring = append(p.ring, b)
	if p.drop > 0 {
		p.drop-- // lost on the way: only a replay recovers it
	} else {
		_ = p.pub.Send(zmq4.NewMsgFrom(nil, seqBytes(b.seq), b.payload))
	}
	for s := range p.subs {
		select {
		case s.ch <- b:
		default: // a subscriber that cannot keep up resubscribes and replays
			close(s.ch)
			delete(p.subs, s)
		}
	}
}

// fault applies the one-shot event faults of an admin configuration: drop the next n
// batches from the PUB stream (they stay in the replay ring), restart the sequence at 0 with
// an empty ring (as a restarted engine's publisher; open gRPC streams end).
func (p *kvPublisher) fault(drop int, restart bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop += drop
	if restart {
		p.next = 0
		p.ring = p.ring[:0]
		for s := range p.subs {
			close(s.ch)
			delete(p.subs, s)
		}
	}
}

// subscribe serves SubscribeKvEvents: the batches after start from the ring, then live ones.
// start 0 streams from the current state; a start the ring no longer holds is OutOfRange; a
// start at or past the current sequence (a subscriber from before a restart) streams live.
func (p *kvPublisher) subscribe(ctx context.Context, start uint64, done <-chan struct{}, send func(*commonpb.KvEventBatch) error) error {
	s := &kvSub{ch: make(chan *kvBatch, 4096)}
	p.mu.Lock()
	var backlog []*kvBatch
	if start > 0 && start < p.next {
		oldest := p.next
		if len(p.ring) > 0 {
			oldest = p.ring[0].seq
		}
		if start+1 < oldest {
			p.mu.Unlock()
			return status.Errorf(codes.OutOfRange, "the replay buffer starts at sequence %d, after %d", oldest, start)
		}
		for _, b := range p.ring {
			if b.seq > start {
				backlog = append(backlog, b)
			}
		}
	}
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if _, ok := p.subs[s]; ok {
			delete(p.subs, s)
		}
		p.mu.Unlock()
	}()
	for _, b := range backlog {
		if err := send(p.proto(b)); err != nil {
			return err
		}
	}
	for {
		select {
		case b, ok := <-s.ch:
			if !ok {
				return status.Error(codes.Unavailable, "the event stream was reset (a slow subscriber or a restarted sequence): subscribe again")
			}
			if err := send(p.proto(b)); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return status.Error(codes.Unavailable, "mockworker closed")
		}
	}
}

// runs yields the events grouped as engines publish them: consecutive stored blocks that
// extend one another form one BlockStored, consecutive removals one BlockRemoved.
func runs(evs []kvEvent, yield func(kind kvKind, run []kvEvent)) {
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].kind == evs[i].kind && evs[i].kind != kvCleared &&
			(evs[i].kind == kvRemoved || evs[j].hasParent && evs[j].parent == evs[j-1].hash) {
			j++
		}
		yield(evs[i].kind, evs[i:j])
		i = j
	}
}

// encode renders b in the publisher's msgpack encoding. msgspec omits nothing it needs here:
// the map encoding carries vLLM's fields, the array encoding SGLang's.
func (p *kvPublisher) encode(b *kvBatch) []byte {
	p.buf.Reset()
	e := p.enco
	var n int
	runs(b.events, func(kvKind, []kvEvent) { n++ })
	if p.enc == KVEncodingArray {
		_ = e.EncodeArrayLen(2)
		_ = e.EncodeFloat64(b.ts)
	} else {
		_ = e.EncodeMapLen(3)
		_ = e.EncodeString("ts")
		_ = e.EncodeFloat64(b.ts)
		_ = e.EncodeString("events")
	}
	_ = e.EncodeArrayLen(n)
	runs(b.events, func(kind kvKind, run []kvEvent) { p.encodeEvent(kind, run) })
	if p.enc != KVEncodingArray {
		_ = e.EncodeString("data_parallel_rank")
		_ = e.EncodeInt(0)
	}
	return bytes.Clone(p.buf.Bytes())
}

func (p *kvPublisher) encodeEvent(kind kvKind, run []kvEvent) {
	e := p.enco
	arr := p.enc == KVEncodingArray
	key := func(k string) {
		if !arr {
			_ = e.EncodeString(k)
		}
	}
	// header opens an event of typ: an array of arrLen fields, or a map of mapLen.
	header := func(arrLen, mapLen int, typ string) {
		if arr {
			_ = e.EncodeArrayLen(arrLen)
		} else {
			_ = e.EncodeMapLen(mapLen)
		}
		key("type")
		_ = e.EncodeString(typ)
	}
	hashes := func() {
		_ = e.EncodeArrayLen(len(run))
		for _, ev := range run {
			_ = e.EncodeUint(ev.hash)
		}
	}
	switch kind {
	case kvStored:
		header(6, 8, "BlockStored")
		key("block_hashes")
		hashes()
		key("parent_block_hash")
		if run[0].hasParent {
			_ = e.EncodeUint(run[0].parent)
		} else {
			_ = e.EncodeNil()
		}
		key("token_ids")
		_ = e.EncodeArrayLen(len(run) * p.blockSize)
		for _, ev := range run {
			for _, t := range ev.tokens {
				_ = e.EncodeUint(uint64(t))
			}
		}
		key("block_size")
		_ = e.EncodeInt(int64(p.blockSize))
		key("lora_id")
		_ = e.EncodeNil()
		if !arr {
			key("medium")
			_ = e.EncodeString("GPU")
			key("lora_name")
			_ = e.EncodeNil()
		}
	case kvRemoved:
		header(2, 3, "BlockRemoved")
		key("block_hashes")
		hashes()
		if !arr {
			key("medium")
			_ = e.EncodeString("GPU")
		}
	case kvCleared:
		header(1, 1, "AllBlocksCleared")
	}
}

// proto renders b as the gRPC stream's batch (hashes as int64, their 64 bits kept).
func (p *kvPublisher) proto(b *kvBatch) *commonpb.KvEventBatch {
	out := &commonpb.KvEventBatch{SequenceNumber: b.seq, Timestamp: b.ts}
	id := b.seq << 16
	runs(b.events, func(kind kvKind, run []kvEvent) {
		id++
		ev := &commonpb.KvCacheEvent{EventId: id}
		switch kind {
		case kvStored:
			st := &commonpb.KvBlocksStored{}
			if run[0].hasParent {
				parent := int64(run[0].parent)
				st.ParentBlockHash = &parent
			}
			for _, r := range run {
				st.Blocks = append(st.Blocks, &commonpb.KvBlock{BlockHash: int64(r.hash), TokenIds: r.tokens, BlockSize: int32(p.blockSize)})
			}
			ev.Data = &commonpb.KvCacheEvent_Stored{Stored: st}
		case kvRemoved:
			rm := &commonpb.KvBlocksRemoved{}
			for _, r := range run {
				rm.BlockHashes = append(rm.BlockHashes, int64(r.hash))
			}
			ev.Data = &commonpb.KvCacheEvent_Removed{Removed: rm}
		case kvCleared:
			ev.Data = &commonpb.KvCacheEvent_Cleared{Cleared: &commonpb.KvCacheCleared{}}
		}
		out.Events = append(out.Events, ev)
	})
	return out
}
