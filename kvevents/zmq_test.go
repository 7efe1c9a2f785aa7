package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/kvevents/kvindex"
)

// recorder is a Sink that keeps the sequence and first block hash of every batch applied.
type recorder struct {
	mu      sync.Mutex
	seqs    []uint64
	clears  int
	dpRanks []int
}

func (r *recorder) Apply(b *Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The batches carry their sequence in their first event's first hash (see batchFor).
	r.seqs = append(r.seqs, b.Events[0].BlockHashes[0])
	r.dpRanks = append(r.dpRanks, b.DPRank)
}

func (r *recorder) Clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clears++
	r.seqs = append(r.seqs, ^uint64(0)) // a marker in the order
}

func (r *recorder) snapshot() ([]uint64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seqs), r.clears
}

// batchFor is the payload of sequence seq: one removal naming seq.
func batchFor(t testing.TB, seq uint64) []byte {
	return encodeBatch(t, maps, float64(seq), 0, []testEvent{{Event: Event{Kind: Removed, BlockHashes: []uint64{seq}}}})
}

// publisher is a test engine: a PUB socket and a ROUTER replay socket on 127.0.0.1 with a
// replay buffer of every batch it published.
type publisher struct {
	t      testing.TB
	pub    zmq4.Socket
	router zmq4.Socket
	mu     sync.Mutex
	buf    map[uint64][]byte
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newPublisher(t testing.TB, pubAddr, routerAddr string) *publisher {
	ctx, cancel := context.WithCancel(context.Background())
	p := &publisher{t: t, buf: map[uint64][]byte{}, cancel: cancel}
	p.pub = zmq4.NewPub(ctx, zmq4.WithLogger(quiet))
	if err := p.pub.Listen("tcp://" + pubAddr); err != nil {
		t.Fatal(err)
	}
	p.router = zmq4.NewRouter(ctx, zmq4.WithLogger(quiet))
	if err := p.router.Listen("tcp://" + routerAddr); err != nil {
		t.Fatal(err)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			msg, err := p.router.Recv()
			if err != nil {
				return
			}
			if len(msg.Frames) != 3 {
				continue
			}
			id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
			p.mu.Lock()
			var seqs []uint64
			for s := range p.buf {
				if s >= start {
					seqs = append(seqs, s)
				}
			}
			slices.Sort(seqs)
			for _, s := range seqs {
				_ = p.router.SendMulti(zmq4.NewMsgFrom(id, nil, binary.BigEndian.AppendUint64(nil, s), p.buf[s]))
			}
			p.mu.Unlock()
			_ = p.router.SendMulti(zmq4.NewMsgFrom(id, nil, binary.BigEndian.AppendUint64(nil, endSeq), nil))
		}
	}()
	return p
}

func (p *publisher) addrs() (string, string) { return p.pub.Addr().String(), p.router.Addr().String() }

// waitSubscriber waits until a subscriber's subscription reached the PUB socket.
func (p *publisher) waitSubscriber() {
	testutil.Eventually(p.t, "a subscriber", func() bool { return len(p.pub.(zmq4.Topics).Topics()) > 0 })
}

// publish sends seq's batch; skip leaves it out of the stream but keeps it for replay.
func (p *publisher) publish(seq uint64, skip bool) {
	payload := batchFor(p.t, seq)
	p.mu.Lock()
	p.buf[seq] = payload
	p.mu.Unlock()
	if skip {
		return
	}
	if err := p.pub.Send(zmq4.NewMsgFrom([]byte(""), binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *publisher) forget(seq uint64) {
	p.mu.Lock()
	delete(p.buf, seq)
	p.mu.Unlock()
}

func (p *publisher) close() {
	p.cancel()
	p.pub.Close()
	p.router.Close()
	p.wg.Wait()
}

func testZMQConfig(pubAddr, routerAddr string) ZMQConfig {
	cfg := DefaultZMQConfig()
	cfg.Endpoint = "tcp://" + pubAddr
	if routerAddr != "" {
		cfg.ReplayEndpoint = "tcp://" + routerAddr
	}
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 20*time.Millisecond
	return cfg
}

func waitSeqs(t *testing.T, r *recorder, want []uint64) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("batches %v", want), func() bool {
		got, _ := r.snapshot()
		return slices.Equal(got, want)
	})
}

const clearMark = ^uint64(0)

// TestZMQOrderGapReplayRestart: batches apply in order; a gap is filled from the replay socket;
// a gap the buffer no longer holds clears the worker; a sequence that goes back (a restarted
// engine) clears it too.
func TestZMQOrderGapReplayRestart(t *testing.T) {
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	defer p.close()
	rec := &recorder{}
	c, err := StartZMQ(testZMQConfig(p.addrs()), func(int) Sink { return rec })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.waitSubscriber()

	p.publish(0, false)
	p.publish(1, false)
	waitSeqs(t, rec, []uint64{0, 1})

	p.publish(2, true) // lost on the way: replayed
	p.publish(3, true)
	p.publish(4, false)
	waitSeqs(t, rec, []uint64{0, 1, 2, 3, 4})

	p.publish(5, true)
	p.forget(5) // lost and gone from the buffer: the worker's state is unknown
	p.publish(6, false)
	waitSeqs(t, rec, []uint64{0, 1, 2, 3, 4, clearMark, 6})

	p.mu.Lock()
	clear(p.buf)
	p.mu.Unlock()
	p.publish(0, false) // the engine restarted
	waitSeqs(t, rec, []uint64{0, 1, 2, 3, 4, clearMark, 6, clearMark, 0})

	st := c.Stats()
	// Replayed counts 2 and the batches the first connection's catch-up may have replayed.
	if st.Gaps != 2 || st.Replayed < 2 || st.Cleared != 2 || st.Applied != 7 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestZMQFirstMessageReplaysHistory: a consumer that subscribes late first replays what the
// engine published before (its buffer from sequence 0).
func TestZMQFirstMessageReplaysHistory(t *testing.T) {
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	defer p.close()
	for s := range uint64(3) {
		p.publish(s, true)
	}
	rec := &recorder{}
	c, err := StartZMQ(testZMQConfig(p.addrs()), func(int) Sink { return rec })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.waitSubscriber()
	p.publish(3, false)
	waitSeqs(t, rec, []uint64{0, 1, 2, 3})
}

// TestZMQDPRanks: rank r subscribes to port + r, each with its own sink and sequence.
func TestZMQDPRanks(t *testing.T) {
	var p0, p1 *publisher
	for attempt := 0; p1 == nil; attempt++ { // two adjacent free ports: listen on one, try the next
		if attempt > 50 {
			t.Fatal("no two adjacent free ports")
		}
		p0 = newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
		pub0, r0 := p0.addrs()
		next := func(a string) string {
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("127.0.0.1:%d", ap.Port()+1)
		}
		if q, err := tryPublisher(t, next(pub0), next(r0)); err == nil {
			p1 = q
		} else {
			p0.close()
		}
	}
	defer p0.close()
	defer p1.close()
	recs := []*recorder{{}, {}}
	cfg := testZMQConfig(p0.addrs())
	cfg.DPRanks = 2
	c, err := StartZMQ(cfg, func(r int) Sink { return recs[r] })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p0.waitSubscriber()
	p1.waitSubscriber()
	p0.publish(0, false)
	p1.publish(0, false)
	p1.publish(1, false)
	waitSeqs(t, recs[0], []uint64{0})
	waitSeqs(t, recs[1], []uint64{0, 1})
}

// tryPublisher starts a publisher on the given addresses if both are free.
func tryPublisher(t testing.TB, pubAddr, routerAddr string) (*publisher, error) {
	for _, a := range []string{pubAddr, routerAddr} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return nil, err
		}
		l.Close()
	}
	return newPublisher(t, pubAddr, routerAddr), nil
}

// TestZMQPublisherStopsAndReturns: a publisher that goes away is dialled again with backoff,
// and a new one on the same port is followed from its first batch (a restarted engine).
func TestZMQPublisherStopsAndReturns(t *testing.T) {
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	pubAddr, routerAddr := p.addrs()
	rec := &recorder{}
	c, err := StartZMQ(testZMQConfig(pubAddr, routerAddr), func(int) Sink { return rec })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.waitSubscriber()
	p.publish(0, false)
	p.publish(1, false)
	waitSeqs(t, rec, []uint64{0, 1})
	p.close()
	testutil.Eventually(t, "reconnect attempts", func() bool { return c.Stats().Reconnects >= 2 })

	p = newPublisher(t, pubAddr, routerAddr)
	defer p.close()
	p.waitSubscriber()
	p.publish(0, false)
	waitSeqs(t, rec, []uint64{0, 1, clearMark, 0})
}

// TestZMQGarbageAndOversizedMessages: messages that do not parse or decode are counted and
// skipped; a message above MaxMessageBytes drops the connection before it is read; the
// consumer goes on with the next batches.
func TestZMQGarbageAndOversizedMessages(t *testing.T) {
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	defer p.close()
	rec := &recorder{}
	// Without a replay socket: the garbage's sequence numbers are not mistaken for the
	// buffer's, and a gap clears the worker.
	pubAddr, _ := p.addrs()
	cfg := testZMQConfig(pubAddr, "")
	cfg.MaxMessageBytes = 64 << 10
	c, err := StartZMQ(cfg, func(int) Sink { return rec })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.waitSubscriber()
	send := func(frames ...[]byte) {
		if err := p.pub.Send(zmq4.NewMsgFrom(frames...)); err != nil {
			t.Fatal(err)
		}
	}
	seq := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
	send([]byte("only one frame"))
	send(nil, []byte{1, 2, 3}, []byte{0x90}) // a sequence of 3 bytes
	send(nil, seq(0), []byte{0xc1, 0xff})    // not msgpack
	p.publish(1, false)
	waitSeqs(t, rec, []uint64{1})
	if st := c.Stats(); st.Dropped != 3 || st.Received != 4 {
		t.Fatalf("stats %+v, want 3 dropped of 4", st)
	}

	send(nil, seq(2), make([]byte, 1<<20))
	testutil.Eventually(t, "the oversized message dropping the connection", func() bool { return c.Stats().Reconnects >= 1 })
	// The old connection may still look subscribed to the PUB socket for a moment: publish
	// new batches until one arrives. Sequence 2 never arrived and cannot be replayed, so the
	// first batch after it clears the worker.
	next := uint64(3)
	testutil.Eventually(t, "a batch after the reconnect", func() bool {
		p.publish(next, false)
		next++
		got, _ := rec.snapshot()
		return len(got) >= 3
	})
	got, _ := rec.snapshot()
	if got[0] != 1 || got[1] != clearMark || got[2] < 3 {
		t.Fatalf("batches %v, want [1 clear k≥3 ...]", got)
	}
}

func TestLimitConnRefusesAHugeFrameHeader(t *testing.T) {
	c := &limitConn{limit: 1 << 20, greeting: zmtpGreeting}
	in := make([]byte, zmtpGreeting)
	in = append(in, flagCommand, 5, 'R', 'E', 'A', 'D', 'Y') // a short command
	in = append(in, flagLong)
	in = binary.BigEndian.AppendUint64(in, 1<<40)
	// Fed a byte at a time, as a slow peer sends it.
	var err error
	for i := range in {
		if err = c.follow(in[i : i+1]); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err %v, want ErrFrameTooLarge", err)
	}
	// A message of many frames counts whole.
	c = &limitConn{limit: 100}
	var frames []byte
	for range 3 {
		frames = append(frames, flagMore, 40)
		frames = append(frames, make([]byte, 40)...)
	}
	if err := c.follow(frames); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("3 frames of 40 bytes under a limit of 100: err %v", err)
	}
}

func TestZMQConfigValidate(t *testing.T) {
	good := testZMQConfig("127.0.0.1:5557", "127.0.0.1:5558")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*ZMQConfig){
		"no endpoint":      func(c *ZMQConfig) { c.Endpoint = "" },
		"wildcard host":    func(c *ZMQConfig) { c.Endpoint = "tcp://*:5557" },
		"ipc":              func(c *ZMQConfig) { c.ReplayEndpoint = "ipc:///tmp/x" },
		"zero ranks":       func(c *ZMQConfig) { c.DPRanks = 0 },
		"tiny limit":       func(c *ZMQConfig) { c.MaxMessageBytes = 10 },
		"no idle timeout":  func(c *ZMQConfig) { c.IdleTimeout = 0 },
		"backoff inverted": func(c *ZMQConfig) { c.BackoffMax = 0 },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got, err := RankEndpoint("tcp://10.0.0.1:5557", 3); err != nil || got != "10.0.0.1:5560" {
		t.Fatalf("RankEndpoint = %q, %v", got, err)
	}
}

// TestZMQFloodStaysBounded: a publisher that sends batches as fast as it can, every block new,
// fills the index only to its bound; the consumer keeps up and stops when closed.
func TestZMQFloodStaysBounded(t *testing.T) {
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	defer p.close()
	const limit, batches, blocks, bs = 1000, 1000, 4, 4
	idx, err := kvindex.New(kvindex.Config{MaxBlocks: limit})
	if err != nil {
		t.Fatal(err)
	}
	h := idx.Holder("w")
	c, err := StartZMQ(testZMQConfig(p.addrs()), func(int) Sink { return IndexSink{Index: idx, Holder: h} })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.waitSubscriber()
	var last []uint32
	for seq := range uint64(batches) {
		ev := Event{Kind: Stored, BlockSize: bs}
		for b := range uint64(blocks) {
			ev.BlockHashes = append(ev.BlockHashes, seq*blocks+b+1)
		}
		if seq%2 == 1 { // odd batches extend the previous batch's chain
			ev.ParentHash, ev.HasParent = (seq-1)*blocks+blocks, true
		}
		for i := range blocks * bs {
			ev.TokenIDs = append(ev.TokenIDs, uint32(seq)<<8|uint32(i))
		}
		if seq == batches-2 {
			last = append([]uint32(nil), ev.TokenIDs...)
		}
		if seq == batches-1 {
			last = append(last, ev.TokenIDs...)
		}
		payload := encodeBatch(t, maps, float64(seq), 0, []testEvent{{Event: ev}})
		p.mu.Lock()
		p.buf[seq] = payload
		p.mu.Unlock()
		if err := p.pub.Send(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
			t.Fatal(err)
		}
	}
	depth := make([]uint32, 1)
	testutil.Eventually(t, "the last chain in the index", func() bool {
		idx.Match(last, depth)
		return depth[0] == 2*blocks
	})
	st := idx.Stats()
	if st.Blocks > limit || st.Evicted == 0 || st.Bytes > kvindex.BytesPerBlock*limit+1024 {
		t.Fatalf("index after %d blocks under a bound of %d: %+v", batches*blocks, limit, st)
	}
}

// TestZMQSilentPublisherIsDialledAgain: a publisher that keeps its connection open and sends
// nothing is dropped after IdleTimeout and dialled again; Close stops the consumer.
func TestZMQSilentPublisherIsDialledAgain(t *testing.T) {
	p := newPublisher(t, "127.0.0.1:0", "127.0.0.1:0")
	defer p.close()
	cfg := testZMQConfig(p.addrs())
	cfg.IdleTimeout, cfg.HandshakeTimeout = 10*time.Millisecond, 50*time.Millisecond
	c, err := StartZMQ(cfg, func(int) Sink { return &recorder{} })
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "idle reconnects", func() bool { return c.Stats().Reconnects >= 3 })
	c.Close()
}
