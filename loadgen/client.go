package loadgen

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// Response headers that name the worker which served a request: the gateway's, else the
// mock engine's own.
const (
	headerRoutedWorker = "x-smg-routed-worker-id"
	headerMockWorker   = "x-mock-worker-id"
)

// client sends requests over one keep-alive fasthttp.HostClient shared by all clientStates.
type client struct {
	hc       *fasthttp.HostClient // nil in PD mode
	pd       *pdRoute             // PD mode: the prefill and decode workers
	url      string
	auth     string
	timeout  time.Duration
	endpoint Endpoint
	stream   bool
	headers  map[string]string
	session  string // Config.SessionHeader
}

// newClient connects to c.BaseURL, or to the PD workers of c.PD, with room for maxConns
// connections per server.
func newClient(c *Config, maxConns int) (*client, error) {
	cl := &client{url: c.requestURL(), timeout: c.Timeout, endpoint: c.Endpoint, stream: c.Stream, headers: c.Headers, session: c.SessionHeader}
	if c.APIKey != "" {
		cl.auth = "Bearer " + c.APIKey
	}
	if c.PD.enabled() {
		pd, err := newPDRoute(c, maxConns)
		if err != nil {
			return nil, err
		}
		cl.pd = pd
		return cl, nil
	}
	hc, err := newHostClient(c, c.BaseURL, maxConns)
	if err != nil {
		return nil, err
	}
	cl.hc = hc
	return cl, nil
}

// newHostClient makes the keep-alive client of the server at rawURL.
func newHostClient(c *Config, rawURL string, maxConns int) (*fasthttp.HostClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("cannot parse URL %q: %w", rawURL, err)
	}
	isTLS := u.Scheme == "https"
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if isTLS {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	hc := &fasthttp.HostClient{
		Addr:  addr,
		IsTLS: isTLS,
		// A load generator must not retry: a retried request would be counted once but
		// served twice.
		MaxIdemponentCallAttempts: 1,
		MaxConns:                  maxConns,
		// Wait for a free connection rather than fail: the concurrency cap, not the pool,
		// decides how many requests are in flight.
		MaxConnWaitTimeout: c.Timeout,
		// Prompts can be megabytes; the default 4 KiB buffers would mean many syscalls.
		WriteBufferSize:          64 << 10,
		ReadBufferSize:           16 << 10,
		NoDefaultUserAgentHeader: true,
		Dial:                     c.Dial,
	}
	if isTLS {
		hc.TLSConfig = &tls.Config{InsecureSkipVerify: c.Insecure, ServerName: u.Hostname()} //nolint:gosec // opt-in via --insecure
	}
	return hc, nil
}

// closeIdle closes the idle connections of every server the client talks to.
func (cl *client) closeIdle() {
	if cl.hc != nil {
		cl.hc.CloseIdleConnections()
	}
	if cl.pd != nil {
		cl.pd.closeIdle()
	}
}

// clientState is what one in-flight request needs; one goroutine uses it at a time, and
// reuses it for the next request so that steady state does not allocate.
type clientState struct {
	req    fasthttp.Request
	resp   fasthttp.Response
	parser fastjson.Parser
	sse    sseReader
	itl    []float64 // inter-token gaps of the current request, ms
	answer []byte    // generated text of the current request, when the source wants it
	body   []byte    // a streamed body read whole (error bodies, non-SSE answers)
	rec    recorder
	// pd is the PD mode's per-client part: the body with the bootstrap fields and the
	// prefill leg's goroutine. Nil otherwise.
	pd *pdState
}

func (cl *client) newState(timelineInterval time.Duration) *clientState {
	st := &clientState{rec: newRecorder(timelineInterval)}
	cl.initRequest(&st.req)
	if cl.pd != nil {
		st.pd = cl.newPDState()
	}
	return st
}

// initRequest sets what every request of the run carries.
func (cl *client) initRequest(req *fasthttp.Request) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(cl.url)
	req.Header.SetContentType("application/json")
	if cl.auth != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, cl.auth)
	}
	for name, value := range cl.headers {
		req.Header.Set(name, value)
	}
}

// close stops what the state owns (the PD prefill leg's goroutine); the state must be idle.
func (st *clientState) close() {
	if st.pd != nil {
		st.pd.close()
	}
}

// failure classifies why a request did not succeed.
type failure uint8

const (
	failNone        failure = iota
	failHTTPStatus          // the server answered with a status other than 200
	failTimeout             // Config.Timeout passed
	failConnection          // connect, write or read error
	failStreamError         // an {"error": ...} payload
	failTruncated           // the stream ended before "data: [DONE]"
	failBadResponse         // a payload that is not JSON
	failPrefill             // PD mode: the prefill worker's answer failed (any of the above)
	numFailures
)

// failureNames are the keys of Result.StatusCounts for failures other than HTTP status.
var failureNames = [numFailures]string{
	failTimeout:     "timeout",
	failConnection:  "connection_error",
	failStreamError: "stream_error",
	failTruncated:   "truncated_stream",
	failBadResponse: "bad_response",
	failPrefill:     "prefill_error",
}

// sample is the measurement of one request.
type sample struct {
	fail          failure
	status        int
	end           time.Duration // completion time since the run started
	e2e, ttft     time.Duration
	contentEvents int
	usage         usage
	promptTokens  int // reported, else the workload's estimate
	outputTokens  int // reported, else content events (streams) or 0
	// detail says why a request failed (an error, the start of an error body); it may view
	// the client state's buffers, so it is valid until the state's next request.
	detail []byte
	// finished, when set, is when the answer was complete ([DONE] arrived); otherwise the
	// request ends when do has read the whole body.
	finished time.Time
}

// do sends it, reads the whole answer, records the sample into st.rec when measured (a
// warm-up request is not) and returns it. runStart is the zero of sample.end.
func (cl *client) do(st *clientState, it *item, runStart time.Time, wantAnswer, measured bool) sample {
	req, resp := &st.req, &st.resp
	hc := cl.hc
	if cl.pd != nil {
		hc = cl.pd.prepare(st, it)
	} else {
		req.SetBodyRaw(it.body)
	}
	req.SetTimeout(cl.timeout)
	if cl.session != "" {
		req.Header.Set(cl.session, it.session) // overwrites in place: no allocation
	}
	resp.StreamBody = cl.stream
	st.itl = st.itl[:0]
	st.answer = st.answer[:0]

	start := time.Now()
	if cl.pd != nil {
		st.pd.startPrefill() // sent at the same time as the decode request below
	}
	err := hc.Do(req, resp)
	var s sample
	if err != nil {
		s.fail = classify(err)
		s.detail = []byte(err.Error())
	} else {
		s.status = resp.StatusCode()
		if measured {
			st.rec.countWorker(workerID(resp))
		}
		if cl.stream {
			s = cl.readStream(st, start, wantAnswer, s)
		} else {
			s = cl.readBody(st, wantAnswer, s)
		}
	}
	now := s.finished
	if now.IsZero() {
		now = time.Now()
	}
	s.e2e = now.Sub(start)
	s.end = now.Sub(runStart)
	if cl.pd != nil {
		// The decode's answer is the request's; a failed prefill fails it (first: a
		// decode that waited for a missing prefill fails only as a consequence).
		if f, detail := st.pd.waitPrefill(); f != failNone {
			s.fail, s.detail = failPrefill, detail
		}
	}
	if s.fail == failNone {
		s.promptTokens, s.outputTokens = it.promptTokens, s.contentEvents
		if s.usage.reported {
			s.promptTokens, s.outputTokens = s.usage.promptTokens, s.usage.completionTokens
		}
		if !cl.stream {
			s.ttft = s.e2e
		}
	}
	if measured {
		st.rec.record(&s, st.itl, cl.stream)
	}
	return s
}

func workerID(resp *fasthttp.Response) []byte {
	if id := resp.Header.Peek(headerRoutedWorker); len(id) > 0 {
		return id
	}
	return resp.Header.Peek(headerMockWorker)
}

// classify maps a transport error to a failure kind.
func classify(err error) failure {
	var te interface{ Timeout() bool }
	if errors.Is(err, fasthttp.ErrTimeout) || (errors.As(err, &te) && te.Timeout()) {
		return failTimeout
	}
	return failConnection
}

// ms converts a duration to float milliseconds, the unit of every latency in a Result.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
