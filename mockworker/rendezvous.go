package mockworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// The KV rendezvous: a prefill fleet's HTTP listener on Host:BootstrapPort where its workers
// publish the KV records of the prompts they computed and decode workers (of any fleet or
// process) claim them, the mock's stand-in for SGLang's bootstrap server and vLLM's
// NIXL/Mooncake side channel. One route:
//
//	GET /kv/{key}?wait_ms=N  200 the record (and the key is claimed); 404 no record came
//	                         within N ms; 409 the key was already claimed; 503 the prefill
//	                         fleet closed while the decode waited
//
// Every answer carries x-mock-rendezvous: 1, so that a decode told to fetch from something
// else (a worker's HTTP port, say) reports it as unreachable rather than as a timeout.

// kvRecord describes the KV a prefill computed.
type kvRecord struct {
	Fingerprint  string `json:"fingerprint"` // promptFingerprint in hex
	PromptTokens int    `json:"prompt_tokens"`
	EngineID     string `json:"engine_id,omitempty"` // vLLM
	BlockIDs     []int  `json:"block_ids,omitempty"` // vLLM
	Worker       string `json:"worker"`              // the prefill worker's id
}

const headerRendezvous = "x-mock-rendezvous"

var (
	errKeyInUse   = errors.New("the key was already published: every request needs its own bootstrap_room")
	errKeyClaimed = errors.New("already claimed by another decode (a room or transfer serves one request)")
)

// kvEntry is a key's state: a placeholder that decodes wait on, then a published record,
// then claimed. Guarded by rendezvous.mu.
type kvEntry struct {
	rec       kvRecord
	ready     chan struct{} // closed when published
	published bool
	claimed   bool
	waiters   int       // decodes waiting for the record
	expires   time.Time // published entries: dropped then, claimed or not
}

// rendezvous is a prefill fleet's KV record store and its HTTP server.
type rendezvous struct {
	ttl     time.Duration
	done    <-chan struct{}
	mu      sync.Mutex
	entries map[string]*kvEntry
	ln      net.Listener
	srv     *http.Server
	serving sync.WaitGroup // Serve and the sweeper
}

// startRendezvous listens on addr and serves until close.
func startRendezvous(addr string, ttl time.Duration, done <-chan struct{}) (*rendezvous, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	rv := &rendezvous{ttl: ttl, done: done, entries: map[string]*kvEntry{}, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key}", rv.serveKV)
	rv.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	rv.serving.Go(func() { _ = rv.srv.Serve(ln) })
	rv.serving.Go(rv.sweep)
	return rv, nil
}

// port is the bound port.
func (rv *rendezvous) port() int { return rv.ln.Addr().(*net.TCPAddr).Port }

// close stops the server once the fleet's done channel is closed (which releases the
// handlers waiting for records) and waits for its goroutines.
func (rv *rendezvous) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rv.srv.Shutdown(ctx)
	_ = rv.srv.Close()
	rv.serving.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// size is the number of keys held: placeholders, records and claimed records not yet expired.
func (rv *rendezvous) size() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.entries)
}

// publish stores rec under key and wakes the decodes waiting for it.
func (rv *rendezvous) publish(key string, rec kvRecord) error {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	e := rv.entries[key]
	if e == nil {
		e = &kvEntry{ready: make(chan struct{})}
		rv.entries[key] = e
	}
	if e.published {
		return errKeyInUse
	}
	e.rec, e.published, e.expires = rec, true, time.Now().Add(rv.ttl)
	close(e.ready)
	return nil
}

// published reports whether key holds a record (claimed or not).
func (rv *rendezvous) published(key string) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	e := rv.entries[key]
	return e != nil && e.published
}

// claim takes key's record, waiting up to wait for it to be published.
func (rv *rendezvous) claim(key string, wait time.Duration, cancel <-chan struct{}) (kvRecord, pdResult) {
	rv.mu.Lock()
	e := rv.entries[key]
	if e == nil {
		e = &kvEntry{ready: make(chan struct{})}
		rv.entries[key] = e
	}
	if !e.published {
		e.waiters++
		rv.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-e.ready:
		case <-t.C:
		case <-cancel:
		case <-rv.done:
		}
		t.Stop()
		rv.mu.Lock()
		e.waiters--
	}
	defer rv.mu.Unlock()
	switch {
	case e.published && e.claimed:
		return kvRecord{}, pdMismatch
	case e.published:
		e.claimed = true
		return e.rec, pdOK
	}
	// Nothing came: a placeholder nobody waits on goes.
	if e.waiters == 0 && rv.entries[key] == e {
		delete(rv.entries, key)
	}
	select {
	case <-rv.done:
		return kvRecord{}, pdClosed
	default:
		return kvRecord{}, pdTimeout
	}
}

// sweep drops expired records, claimed or not, so that an unclaimed KV does not leak.
func (rv *rendezvous) sweep() {
	tick := min(max(rv.ttl/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-rv.done:
			return
		case now := <-t.C:
			rv.mu.Lock()
			for k, e := range rv.entries {
				if e.published && now.After(e.expires) {
					delete(rv.entries, k)
				}
			}
			rv.mu.Unlock()
		}
	}
}

// maxWait bounds the wait a decode may ask for.
const maxWait = 10 * time.Minute

func (rv *rendezvous) serveKV(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(headerRendezvous, "1")
	w.Header().Set("Content-Type", contentJSON)
	wait := rv.ttl
	if s := r.URL.Query().Get("wait_ms"); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":"wait_ms must be a non-negative integer"}`)
			return
		}
		wait = min(time.Duration(ms)*time.Millisecond, maxWait)
	}
	rec, res := rv.claim(r.PathValue("key"), wait, r.Context().Done())
	switch res {
	case pdOK:
		_ = json.NewEncoder(w).Encode(rec)
	case pdMismatch:
		w.WriteHeader(409)
		_, _ = io.WriteString(w, `{"error":"already claimed"}`)
	case pdClosed:
		w.WriteHeader(503)
		_, _ = io.WriteString(w, `{"error":"the prefill fleet is closing"}`)
	default:
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"error":"no record in time"}`)
	}
}

// kvClient is a decode fleet's client of rendezvous servers.
type kvClient struct {
	hc *http.Client
}

func newKVClient() *kvClient {
	return &kvClient{hc: &http.Client{Transport: &http.Transport{
		Proxy:               nil, // loopback peers; never an environment proxy
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}}
}

func (c *kvClient) close() { c.hc.CloseIdleConnections() }

// kvGrace is how long past the wait a fetch gives the rendezvous to answer.
const kvGrace = 2 * time.Second

// fetch claims key at the rendezvous addr, waiting up to wait for its prefill. err explains
// a mismatch (a claimed key) or an unreachable rendezvous.
func (c *kvClient) fetch(addr, key string, wait time.Duration, done, gone <-chan struct{}) (kvRecord, pdResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait+kvGrace)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-done:
		case <-gone:
		case <-stop:
			return
		}
		cancel()
	}()
	u := "http://" + addr + "/kv/" + url.PathEscape(key) + "?wait_ms=" + strconv.FormatInt(wait.Milliseconds(), 10)
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return kvRecord{}, pdUnreachable, err
	}
	closed := func() bool {
		select {
		case <-done:
			return true
		case <-gone:
			return true
		default:
			return false
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		switch {
		case closed():
			return kvRecord{}, pdClosed, err
		case errors.Is(err, context.DeadlineExceeded):
			return kvRecord{}, pdTimeout, err
		}
		return kvRecord{}, pdUnreachable, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if closed() {
			return kvRecord{}, pdClosed, err
		}
		return kvRecord{}, pdUnreachable, err
	}
	if resp.Header.Get(headerRendezvous) == "" {
		return kvRecord{}, pdUnreachable, fmt.Errorf("%s is not a mockworker KV rendezvous (HTTP %d)", addr, resp.StatusCode)
	}
	switch resp.StatusCode {
	case 200:
		var rec kvRecord
		if err := json.Unmarshal(body, &rec); err != nil {
			return kvRecord{}, pdUnreachable, fmt.Errorf("bad record from %s: %w", addr, err)
		}
		return rec, pdOK, nil
	case 404:
		return kvRecord{}, pdTimeout, nil
	case 409:
		return kvRecord{}, pdMismatch, errKeyClaimed
	}
	return kvRecord{}, pdUnreachable, fmt.Errorf("HTTP %d from %s: %s", resp.StatusCode, addr, clip(string(body)))
}
