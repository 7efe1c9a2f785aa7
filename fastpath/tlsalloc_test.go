//go:build !race

package fastpath

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
)

// tlsWorkerProcessEnv, set to "<cert file>,<key file>", makes the test binary a TLS worker
// process (TestMain): the allocation test counts the gateway's allocations only, and an
// in-process worker's crypto/tls and HTTP server would count with them.
const tlsWorkerProcessEnv = "SMG_TEST_TLS_WORKER_PROCESS"

func TestMain(m *testing.M) {
	if files := os.Getenv(tlsWorkerProcessEnv); files != "" {
		serveTLSWorkerProcess(files)
		return
	}
	testutil.VerifyNoLeaks(m)
}

// serveTLSWorkerProcess serves okBody (an SSE answer for "stream":true) over TLS on a
// loopback port it prints, until its standard input closes.
func serveTLSWorkerProcess(files string) {
	certFile, keyFile, _ := strings.Cut(files, ",")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	os.Stdout.WriteString(ln.Addr().String() + "\n")
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if bytesContains(ctx.PostBody(), `"stream":true`) {
			ctx.SetContentType("text/event-stream")
			ctx.Response.SetBodyRaw(tlsStreamAnswer)
			return
		}
		ctx.SetContentType("application/json")
		ctx.Response.SetBodyRaw(okBody)
	}}
	_ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}}))
}

var tlsStreamAnswer = []byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")

// startTLSWorkerProcess runs the test binary as a TLS worker with pki's certificate and
// returns its address.
func startTLSWorkerProcess(t testing.TB, pki *testutil.PKI) string {
	_, cert, key := pki.Files(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), tlsWorkerProcessEnv+"="+cert+","+key)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the TLS worker process: %v", err)
	}
	return strings.TrimSpace(addr)
}

// maxTLSAllocs is what a round trip to a worker behind TLS allocates on the loops: one
// per TLS record read, and these answers are one record each. crypto/tls's Conn.Read
// allocates the atLeastReader it hands bytes.Buffer.ReadFrom for every record it starts to
// read from an empty buffer (conn.go, readFromUntil: 16 bytes that escape through the
// io.Reader); the loops feed it whole records only, so it never reads once more to find
// nothing (2 per round trip before that). Everything else on the path allocates nothing.
const maxTLSAllocs = 1

// TestTLSRoundTripDoesNotAllocateBeyondItsRecords counts the gateway's heap allocations per round trip to a
// worker behind TLS in another process (a real loopback TLS connection, kept alive), held
// and relayed: at most maxTLSAllocs on the loops.
func TestTLSRoundTripDoesNotAllocateBeyondItsRecords(t *testing.T) {
	pki := testutil.NewPKI(t)
	addr := startTLSWorkerProcess(t, pki)
	g := &gateway{t: t, tls: pki.ClientConfig()}
	g.start(Config{}, policy.RouterConfig{DefaultPolicy: "round_robin"},
		func(string) (net.Conn, error) { return net.Dial("tcp", addr) },
		func() {
			g.srv.resolveUpstream = func(string) string { return addr } // before Serve
			g.addWorker("https://10.0.0.1:8000", "m1")
		})
	for _, c := range []struct{ name, body string }{
		{"held", chatBody},
		{"relayed", `{"model":"m1","messages":[{"role":"user","content":"hello"}],"stream":true}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := fasthttp.AcquireRequest()
			resp := fasthttp.AcquireResponse()
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://gateway/v1/chat/completions")
			req.SetBodyString(c.body)
			roundTrip := func() {
				if err := g.client.DoTimeout(req, resp, 5*time.Second); err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode() != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
				}
			}
			for range 200 {
				roundTrip()
			}
			if allocs := testing.AllocsPerRun(500, roundTrip); allocs > maxTLSAllocs {
				t.Fatalf("%.2f allocations per TLS round trip, want at most %d (one per TLS record read)", allocs, maxTLSAllocs)
			}
		})
	}
}
