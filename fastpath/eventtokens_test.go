package fastpath

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smg-go/smg/engine/grpcworker"
	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/roundrobin"
	"github.com/smg-go/smg/worker"
)

// tokenWanter is round robin that wants token ids (as cache_aware in event mode does) and
// remembers how many the last request it picked carried.
type tokenWanter struct {
	policy.Builder
	lastTokens atomic.Int64
	picks      atomic.Int64
}

type tokenWantingPicker struct {
	policy.Picker
	b *tokenWanter
}

func (b *tokenWanter) Build(g policy.Group) policy.Picker {
	return tokenWantingPicker{Picker: b.Builder.Build(g), b: b}
}

func (tokenWantingPicker) WantsTokens() bool { return true }

func (p tokenWantingPicker) Pick(req *policy.Request) (policy.Result, error) {
	p.b.lastTokens.Store(int64(len(req.Tokens)))
	p.b.picks.Add(1)
	return p.Picker.Pick(req)
}

// tokenizingBackend holds model m1's tokenizer (Qwen3's) as --model-path gives it; its
// workers are HTTP workers.
func tokenizingBackend(t *testing.T) *GRPCBackend {
	_, tok, tmpl := loadQwen3(t)
	model := GRPCModel{ID: "m1", Tokenizer: tok, Template: tmpl, EOSTokenIDs: tok.EOSTokenIDs(), MaxPromptTokens: 200}
	return &GRPCBackend{
		IsGRPC: func(*worker.Worker) bool { return false },
		Client: func(*worker.Worker) (*grpcworker.Client, error) { return nil, errors.New("no gRPC workers here") },
		Model: func(name string) (GRPCModel, bool) {
			return model, name == "m1"
		},
		Tokenizers: 1,
	}
}

// builders gives tw for the policy named "tokens" and round robin for any other.
func builders(tw *tokenWanter) policy.NewBuilderFunc {
	return func(name string, _ bool) (policy.Builder, error) {
		if name == "tokens" {
			return tw, nil
		}
		return roundrobin.New(), nil
	}
}

// newTokenizingGateway is a gateway over one fake HTTP worker whose model's picker wants
// token ids, holding the model's tokenizer.
func newTokenizingGateway(t *testing.T, cfg Config) (*gateway, *fakeWorker, *tokenWanter) {
	cfg.GRPC = tokenizingBackend(t)
	tw := &tokenWanter{Builder: roundrobin.New()}
	rc := policy.RouterConfig{DefaultPolicy: "tokens", NewBuilder: builders(tw)}
	fw := newFakeWorker(t, "w1", 200)
	g := &gateway{t: t, fakes: map[string]*fakeWorker{"10.0.0.1:8000": fw}}
	g.start(cfg, rc, func(addr string) (net.Conn, error) { return g.fake(addr).ln.Dial() }, func() {
		g.addWorker("http://10.0.0.1:8000", "m1")
	})
	return g, fw, tw
}

const tokenizedChat = `{"model":"m1","messages":[{"role":"system","content":"You are a careful assistant."},{"role":"user","content":"Name three rivers."}]}`

// tokenJobRunning reports whether a request's tokenization goroutine is alive.
func tokenJobRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "fastpath.(*tokenJob).run")
}

// sendRaw writes a request with body on a new client connection, left open.
func sendRaw(t *testing.T, g *gateway, path, body string) net.Conn {
	t.Helper()
	c, err := g.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	return c
}

// An HTTP text request whose picker wants token ids is picked on the ids its model's
// tokenizer gives its rendered chat, and forwarded as the client sent it.
func TestTextRequestIsPickedOnItsTokens(t *testing.T) {
	g, fw, tw := newTokenizingGateway(t, Config{})
	fw.bodies = make(chan []byte, 1)
	resp := g.do("POST", "/v1/chat/completions", tokenizedChat)
	if resp.StatusCode() != 200 {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
	}
	if got := <-fw.bodies; string(got) != tokenizedChat {
		t.Fatalf("the worker got %s, not the client's body", got)
	}
	// The rendered chat: the template's markers and both messages, about 25 Qwen3 tokens.
	if n := tw.lastTokens.Load(); n < 15 || n > 40 {
		t.Fatalf("picked on %d tokens, want the rendered chat's (15-40)", n)
	}
	// A prompt the tokenizer refuses (longer than the model takes) is picked on its text and
	// left to its engine to judge.
	long := fmt.Sprintf(`{"model":"m1","messages":[{"role":"user","content":%q}]}`, strings.Repeat("many more words ", 200))
	resp = g.do("POST", "/v1/chat/completions", long)
	if tw.lastTokens.Load() != 0 || resp.StatusCode() != 200 || tw.picks.Load() != 2 {
		t.Fatalf("refused prompt: %d picks, the last on %d tokens, status %d", tw.picks.Load(), tw.lastTokens.Load(), resp.StatusCode())
	}
}

// A client that leaves while its request waits to be tokenized frees its place at once: the
// tokenization is skipped, nothing reaches a worker and nothing stays in flight.
func TestClientGoneWhileTokenizingReachesNoWorker(t *testing.T) {
	g, fw, tw := newTokenizingGateway(t, Config{})
	sem := g.srv.cfg.GRPC.sem
	sem <- struct{}{} // the one slot taken, as by a long prompt being tokenized
	c := sendRaw(t, g, "/v1/chat/completions", tokenizedChat)
	testutil.Eventually(t, "a request waits for a tokenizer slot", tokenJobRunning)
	c.Close()
	testutil.Eventually(t, "the client's connection closed on the gateway", func() bool { return g.srv.openConnections() == 0 })
	<-sem
	testutil.Eventually(t, "the tokenization goroutine ended", func() bool { return !tokenJobRunning() })
	if n := tw.picks.Load(); n != 0 {
		t.Fatalf("%d picks for a request whose client left", n)
	}
	if n := len(fw.served); n != 0 {
		t.Fatalf("the worker served %d requests", n)
	}
	if n := g.inFlight(); n != 0 {
		t.Fatalf("%d in flight", n)
	}
	// The loop serves the next request.
	if resp := g.do("POST", "/v1/chat/completions", tokenizedChat); resp.StatusCode() != 200 {
		t.Fatalf("next request: %d %s", resp.StatusCode(), resp.Body())
	}
}

// A request still waiting to be tokenized at its deadline gets 504 and reaches no worker.
func TestTokenizingPastTheDeadlineTimesOut(t *testing.T) {
	g, fw, tw := newTokenizingGateway(t, Config{RequestTimeout: 300 * time.Millisecond})
	sem := g.srv.cfg.GRPC.sem
	sem <- struct{}{}
	c := sendRaw(t, g, "/v1/chat/completions", tokenizedChat)
	defer c.Close()
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 504") {
		t.Fatalf("status line %q, %v; want 504", status, err)
	}
	<-sem
	testutil.Eventually(t, "the tokenization goroutine ended", func() bool { return !tokenJobRunning() })
	if n := tw.picks.Load(); n != 0 {
		t.Fatalf("%d picks for a request that timed out being tokenized", n)
	}
	if n := len(fw.served); n != 0 {
		t.Fatalf("the worker served %d requests", n)
	}
}

// In PD mode a text request whose prefill picker wants token ids is tokenized first and the
// pair picked on the ids; the legs get the client's body with the bootstrap fields.
func TestPDTextRequestIsPickedOnItsTokens(t *testing.T) {
	p1 := newPDFake(t, answerJSON(`{"prefill":1}`))
	d1 := newPDFake(t, answerJSON(decodeAnswer))
	tw := &tokenWanter{Builder: roundrobin.New()}
	rc := policy.RouterConfig{DefaultPolicy: "round_robin", PD: &policy.PDPolicies{Prefill: "tokens", Decode: "round_robin"}, NewBuilder: builders(tw)}
	g := newLegsGateway(t, Config{GRPC: tokenizingBackend(t)}, rc,
		legFakes{"10.0.1", worker.TypePrefill, map[string]string{worker.LabelBootstrapPort: "9001"}, []*pdFake{p1}},
		legFakes{"10.0.2", worker.TypeDecode, nil, []*pdFake{d1}})
	resp := g.do("POST", "/v1/chat/completions", tokenizedChat)
	if resp.StatusCode() != 200 || !strings.Contains(string(resp.Body()), "from decode") {
		t.Fatalf("%d %s", resp.StatusCode(), resp.Body())
	}
	if n := tw.lastTokens.Load(); n < 15 || n > 40 || tw.picks.Load() != 1 {
		t.Fatalf("prefill picked %d times, the last on %d tokens; want once, on the rendered chat's (15-40)", tw.picks.Load(), n)
	}
	if got := p1.received(); len(got) != 1 || got[0]["bootstrap_host"] != "10.0.1.1" || len(d1.received()) != 1 {
		t.Fatalf("prefill got %v, decode %d bodies", got, len(d1.received()))
	}
	testutil.Eventually(t, "in-flight back to 0", func() bool { return g.inFlight() == 0 })
}
