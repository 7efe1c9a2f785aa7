package e2e

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/smg-go/smg/internal/testutil"
)

// publisher is a ZMQ PUB socket the test speaks through, as an engine's KV-event publisher.
type publisher struct {
	sock     zmq4.Socket
	endpoint string
	seq      uint64
}

func newPublisher(t *testing.T) *publisher {
	t.Helper()
	sock := zmq4.NewPub(context.Background())
	if err := sock.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p := &publisher{sock: sock, endpoint: "tcp://" + sock.Addr().String()}
	t.Cleanup(func() { sock.Close() })
	return p
}

// sendBlocks publishes one batch storing n fresh blocks of 16 tokens (tagged arrays, as SGLang
// encodes them). Safe to call from any goroutine.
func (p *publisher) sendBlocks(rng *rand.Rand, n int) error {
	var buf strings.Builder
	e := msgpack.NewEncoder(&buf)
	var encErr error
	must := func(err error) { encErr = cmp.Or(encErr, err) }
	must(e.EncodeArrayLen(3))
	must(e.EncodeFloat64(1))
	must(e.EncodeArrayLen(1))
	must(e.EncodeArrayLen(6))
	must(e.EncodeString("BlockStored"))
	must(e.EncodeArrayLen(n))
	for range n {
		must(e.EncodeInt(rng.Int64()))
	}
	must(e.EncodeNil())
	must(e.EncodeArrayLen(16 * n))
	for range 16 * n {
		must(e.EncodeUint(uint64(rng.IntN(150000))))
	}
	must(e.EncodeInt(16))
	must(e.EncodeNil())
	must(e.EncodeNil())
	if encErr != nil {
		return encErr
	}
	err := p.send([]byte{}, binary.BigEndian.AppendUint64(nil, p.seq), []byte(buf.String()))
	p.seq++
	return err
}

func (p *publisher) send(frames ...[]byte) error { return p.sock.SendMulti(zmq4.NewMsgFrom(frames...)) }

// rssBytes is a process's resident memory (VmRSS).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestKVEventPublishersThatMisbehave: three HTTP engines whose KV-event publishers misbehave,
// behind the real smg: one sends garbage (wrong frame counts, short sequences, payloads that
// are not msgpack batches), one floods (batches of 256 new blocks as fast as it can, far past
// --kv-index-max-blocks), one stops (its socket closes). Throughout, smg answers every
// request; it counts the garbage as dropped, keeps the index within its bound (evicting),
// stays within a bounded memory, and dials the stopped publisher again.
func TestKVEventPublishersThatMisbehave(t *testing.T) {
	const maxBlocks = 4096
	mocks := StartMocks(t, 3, "--mode", "engine", "--block-size", "16", "--model", "m")
	garbage, flood, stopper := newPublisher(t), newPublisher(t), newPublisher(t)
	g := StartGatewayUnready(t, nil, "--policy", "cache_aware", "--kv-index-max-blocks", strconv.Itoa(maxBlocks))
	for i, p := range []*publisher{garbage, flood, stopper} {
		body := fmt.Sprintf(`{"url":%q,"model_id":"m","kv_events_endpoint":%q}`, mocks.URLs[i], p.endpoint)
		if r := MustDo(t, http.MethodPost, g.URL+"/workers", body, nil); r.Status != 202 {
			t.Fatalf("register %s: %d %s", mocks.URLs[i], r.Status, r.Body)
		}
	}
	g.WaitReady(t)
	metric := func(name, worker string) float64 {
		v, _ := Metric(t, g.MetricsURL, name+`{worker="`+worker+`"}`)
		return v
	}
	rssBefore := rssBytes(t, g.Cmd.Process.Pid)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Add(2)
	go func() { // garbage, until the test ends
		defer wg.Done()
		bad := [][][]byte{
			{[]byte("one frame")},
			{{}, []byte("short"), []byte("payload")},
			{{}, binary.BigEndian.AppendUint64(nil, 1), []byte("not msgpack")},
			{{}, binary.BigEndian.AppendUint64(nil, 2), {0x93, 0xcb}}, // a batch cut short
			{{}, binary.BigEndian.AppendUint64(nil, 3), {0x91, 0x91, 0xa7, 'U', 'n', 'k', 'n', 'o', 'w', 'n'}},
		}
		for i := 0; ctx.Err() == nil; i++ {
			if garbage.send(bad[i%len(bad)]...) != nil {
				return
			}
		}
	}()
	go func() { // a flood of valid batches, until the test ends
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for ctx.Err() == nil {
			if flood.sendBlocks(rng, 256) != nil {
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(3, 4))
	testutil.Eventually(t, "the stopping publisher's batches applied", func() bool {
		_ = stopper.sendBlocks(rng, 4)
		return metric("smg_kv_events_applied_total", mocks.URLs[2]) > 0
	})
	reconnects := metric("smg_kv_events_reconnects_total", mocks.URLs[2])
	stopper.sock.Close()

	ids := make([]string, 64)
	for i := range ids {
		ids[i] = strconv.Itoa(1000 + i)
	}
	served := 0
	ask := func() {
		t.Helper()
		body := `{"model":"m","input_ids":[` + strings.Join(ids, ",") + `,` + strconv.Itoa(served) + `],"sampling_params":{"max_new_tokens":1}}`
		if r := MustDo(t, http.MethodPost, g.URL+"/generate", body, nil); r.Status != 200 {
			t.Fatalf("request %d during the faults: %d %s", served, r.Status, r.Body)
		}
		served++
	}
	blocks := func() float64 {
		v, _ := Metric(t, g.MetricsURL, `smg_kv_index_blocks{model="m"}`)
		return v
	}
	testutil.Eventually(t, "garbage dropped, the flood past the bound applied, the stopped publisher dialled again", func() bool {
		ask()
		if b := blocks(); b > maxBlocks {
			t.Fatalf("the index holds %v blocks, past --kv-index-max-blocks %d", b, maxBlocks)
		}
		return metric("smg_kv_events_dropped_total", mocks.URLs[0]) >= 100 &&
			metric("smg_kv_events_applied_total", mocks.URLs[1])*256 >= 10*maxBlocks &&
			metric("smg_kv_events_reconnects_total", mocks.URLs[2]) > reconnects
	})
	if applied := metric("smg_kv_events_applied_total", mocks.URLs[0]); applied != 0 {
		t.Errorf("%v garbage batches applied", applied)
	}
	if v, _ := Metric(t, g.MetricsURL, `smg_kv_index_evicted_total{model="m"}`); v == 0 {
		t.Error("the flood past the bound evicted nothing")
	}
	// Bounded memory: the index is at most maxBlocks × 64 bytes; what else the flood could
	// pile up (undecoded messages) would show here. 256 MiB leaves the runtime its slack.
	if grew := rssBytes(t, g.Cmd.Process.Pid) - rssBefore; grew > 256<<20 {
		t.Errorf("smg's resident memory grew %d MiB during the flood", grew>>20)
	}
	for range 5 {
		ask()
	}
	t.Logf("%d requests served during the faults; flood applied %v batches, garbage dropped %v",
		served, metric("smg_kv_events_applied_total", mocks.URLs[1]), metric("smg_kv_events_dropped_total", mocks.URLs[0]))
}
