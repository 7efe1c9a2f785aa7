package loadgen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/smg-go/smg/internal/jsonx"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// PDConfig sends every request straight to a prefill and a decode worker with SGLang's
// bootstrap protocol, as SGLang's mini load balancer does: the baseline a gateway's
// prefill-decode (PD) disaggregation is measured against. Both lists set: PD mode (BaseURL
// must then be empty); both empty: off.
//
// Per request loadgen picks the next prefill and the next decode worker (round robin over
// each list), adds "bootstrap_host" (the prefill URL's host), "bootstrap_port"
// (BootstrapPort, or null) and "bootstrap_room" (a random integer in 0..2^63-1) to the
// request body, and sends that body to both workers at once. The decode worker's answer is
// measured like any answer (TTFT, latency, tokens, the worker that served it); the prefill's
// is read whole and checked (HTTP 200, JSON or an event stream ending in [DONE], no error
// payload): a failed prefill fails the request as "prefill_error", whatever the decode said.
type PDConfig struct {
	// Prefill and Decode are worker URLs as a gateway's --prefill and --decode take them,
	// e.g. "http://127.0.0.1:30001" (a trailing "/v1" is accepted; https:// for TLS).
	Prefill []string `json:"prefill,omitempty"`
	Decode  []string `json:"decode,omitempty"`
	// BootstrapPort is sent as "bootstrap_port" with every request: the prefill workers' KV
	// bootstrap port (SGLang's --disaggregation-bootstrap-port, 8998 by default), the same
	// for every prefill. 0 sends null: the decode then asks its own default port.
	BootstrapPort int `json:"bootstrap_port,omitempty"`
}

// enabled reports whether PD mode is asked for (either list set; Validate wants both).
func (p *PDConfig) enabled() bool { return len(p.Prefill) > 0 || len(p.Decode) > 0 }

// validate appends PD mode's configuration errors.
func (p *PDConfig) validate(c *Config, bad func(format string, args ...any)) {
	if !p.enabled() {
		return
	}
	if c.BaseURL != "" {
		bad("BaseURL (--base-url) and PD mode (--pd-prefill, --pd-decode) exclude each other: PD mode sends every request to the workers; drop --base-url")
	}
	if len(p.Prefill) == 0 || len(p.Decode) == 0 {
		bad("PD mode needs at least one prefill (--pd-prefill) and one decode (--pd-decode) worker URL")
	}
	for _, list := range []struct {
		flag string
		urls []string
	}{{"--pd-prefill", p.Prefill}, {"--pd-decode", p.Decode}} {
		for _, raw := range list.urls {
			if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("PD worker URL %q (%s) is not an http:// or https:// URL with a host: use e.g. http://127.0.0.1:30001", raw, list.flag)
			}
		}
	}
	if p.BootstrapPort < 0 || p.BootstrapPort > 65535 {
		bad("PD.BootstrapPort (--pd-bootstrap-port) %d is not a port: use 1-65535, or none (0) to send null", p.BootstrapPort)
	}
}

// pdTarget is one PD worker.
type pdTarget struct {
	hc   *fasthttp.HostClient
	uri  string // where requests are posted
	name string // the URL as configured, for failure details
	// bootstrap (prefill targets) is the body's tail up to the room number:
	// `,"bootstrap_host":"H","bootstrap_port":P,"bootstrap_room":`.
	bootstrap []byte
}

// pdRoute holds the workers of PD mode and the round-robin cursors over them.
type pdRoute struct {
	prefill, decode         []pdTarget
	nextPrefill, nextDecode atomic.Uint64
}

func newPDRoute(c *Config, maxConns int) (*pdRoute, error) {
	r := &pdRoute{}
	for _, raw := range c.PD.Prefill {
		t, err := newPDTarget(c, raw, maxConns)
		if err != nil {
			return nil, err
		}
		u, _ := url.Parse(raw) // parsed by newPDTarget already
		t.bootstrap = jsonx.AppendString(append(t.bootstrap, `,"bootstrap_host":`...), u.Hostname())
		t.bootstrap = append(t.bootstrap, `,"bootstrap_port":`...)
		if c.PD.BootstrapPort == 0 {
			t.bootstrap = append(t.bootstrap, "null"...)
		} else {
			t.bootstrap = strconv.AppendInt(t.bootstrap, int64(c.PD.BootstrapPort), 10)
		}
		t.bootstrap = append(t.bootstrap, `,"bootstrap_room":`...)
		r.prefill = append(r.prefill, t)
	}
	for _, raw := range c.PD.Decode {
		t, err := newPDTarget(c, raw, maxConns)
		if err != nil {
			return nil, err
		}
		r.decode = append(r.decode, t)
	}
	return r, nil
}

func newPDTarget(c *Config, raw string, maxConns int) (pdTarget, error) {
	hc, err := newHostClient(c, raw, maxConns)
	if err != nil {
		return pdTarget{}, err
	}
	return pdTarget{hc: hc, uri: c.workerRequestURL(raw), name: raw}, nil
}

func (r *pdRoute) closeIdle() {
	for _, list := range [][]pdTarget{r.prefill, r.decode} {
		for i := range list {
			list[i].hc.CloseIdleConnections()
		}
	}
}

// pdState is one client's PD part. The prefill leg runs on a goroutine of its own, started
// with the state and kept for its life, so that a request costs two channel hand-offs
// rather than a goroutine start (and regrowing its stack through fasthttp's call chain).
type pdState struct {
	cl   *client
	body []byte // the current request's body with the bootstrap fields; sent to both workers

	// The prefill leg: written by its goroutine between a start and the matching done.
	req    fasthttp.Request
	resp   fasthttp.Response
	parser fastjson.Parser
	sse    sseReader
	rd     bytes.Reader
	target *pdTarget
	fail   failure
	detail []byte

	start chan struct{}
	done  chan struct{}
}

func (cl *client) newPDState() *pdState {
	p := &pdState{cl: cl, start: make(chan struct{}), done: make(chan struct{})}
	cl.initRequest(&p.req)
	go p.loop()
	return p
}

// close ends the prefill leg's goroutine.
func (p *pdState) close() { close(p.start) }

func (p *pdState) loop() {
	for range p.start {
		p.fail, p.detail = p.cl.prefill(p)
		p.done <- struct{}{}
	}
}

// prepare picks the workers of st's next request, builds its body and readies both
// requests; it returns the decode worker's client, which do sends st.req to.
func (r *pdRoute) prepare(st *clientState, it *item) *fasthttp.HostClient {
	p := st.pd
	pf := &r.prefill[(r.nextPrefill.Add(1)-1)%uint64(len(r.prefill))]
	dc := &r.decode[(r.nextDecode.Add(1)-1)%uint64(len(r.decode))]
	// Every body the builder makes is a JSON object: splice the fields in before its '}'.
	p.body = append(p.body[:0], it.body[:len(it.body)-1]...)
	p.body = append(p.body, pf.bootstrap...)
	p.body = strconv.AppendUint(p.body, rand.Uint64()>>1, 10)
	p.body = append(p.body, '}')

	st.req.SetRequestURI(dc.uri)
	st.req.SetBodyRaw(p.body)
	p.target = pf
	p.req.SetRequestURI(pf.uri)
	p.req.SetBodyRaw(p.body)
	p.req.SetTimeout(p.cl.timeout)
	if s := p.cl.session; s != "" {
		p.req.Header.Set(s, it.session)
	}
	return dc.hc
}

// startPrefill sends the prepared prefill request on the leg's goroutine.
func (p *pdState) startPrefill() { p.start <- struct{}{} }

// waitPrefill waits for the prefill's answer; detail views p's buffer until the next request.
func (p *pdState) waitPrefill() (failure, []byte) {
	<-p.done
	return p.fail, p.detail
}

// prefill sends p's request and reads and checks the whole answer.
func (cl *client) prefill(p *pdState) (failure, []byte) {
	detail := p.detail[:0]
	if err := p.target.hc.Do(&p.req, &p.resp); err != nil {
		return failPrefill, fmt.Appendf(detail, "prefill %s: %v", p.target.name, err)
	}
	body := p.resp.Body()
	if code := p.resp.StatusCode(); code != fasthttp.StatusOK {
		return failPrefill, fmt.Appendf(detail, "prefill %s: HTTP %d: %s", p.target.name, code, cut(body))
	}
	if !bytes.HasPrefix(p.resp.Header.ContentType(), []byte("text/event-stream")) {
		pl, err := parsePayload(&p.parser, cl.endpoint, body)
		if err != nil || pl.failed {
			return failPrefill, fmt.Appendf(detail, "prefill %s: %s", p.target.name, cut(body))
		}
		return failNone, detail
	}
	p.rd.Reset(body)
	p.sse.reset(&p.rd)
	for {
		data, err := p.sse.next()
		if err != nil {
			return failPrefill, fmt.Appendf(detail, "prefill %s: stream ended before data: [DONE]", p.target.name)
		}
		if string(data) == "[DONE]" {
			return failNone, detail
		}
		if pl, err := parsePayload(&p.parser, cl.endpoint, data); err != nil || pl.failed {
			return failPrefill, fmt.Appendf(detail, "prefill %s: %s", p.target.name, cut(data))
		}
	}
}

// cut bounds a body quoted in a failure detail.
func cut(b []byte) []byte {
	if len(b) > maxExample {
		return b[:maxExample]
	}
	return b
}
