package mockworker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Fleet is a set of workers started together; each listens on its own port.
type Fleet struct {
	cfg       Config
	workers   []*Worker
	server    server
	done      chan struct{} // closed by Close: paced streams, delays and hangs give up
	closeOnce sync.Once
	closeErr  error
	engines   sync.WaitGroup // engine drivers (engine mode)
	pd        *pdShared      // PD roles: the rendezvous (prefill) or KV client (decode)
}

// server is an HTTP implementation under the workers (gnet or fasthttp).
type server interface {
	// serve starts serving lns[i] as ws[i] and returns at once.
	serve(ws []*Worker, lns []net.Listener) error
	// close stops accepting, drops every connection and waits for the server's goroutines.
	close() error
}

// Start validates cfg, binds every worker's port and starts serving. The caller must Close
// the fleet.
func Start(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot start mockworker: %w", err)
	}
	var v *vocab
	var prompts *modelPrompts
	var err error
	switch {
	case cfg.Protocol == ProtocolGRPC:
		if v, err = loadVocab(cfg.TokenizerPath); err != nil {
			return nil, fmt.Errorf("cannot start mockworker: %w", err)
		}
	case cfg.TokenizerPath != "":
		if prompts, err = openPrompts(cfg.TokenizerPath); err != nil {
			return nil, fmt.Errorf("cannot start mockworker: %w", err)
		}
	}
	f := &Fleet{cfg: cfg, done: make(chan struct{}), pd: &pdShared{bootstrapPort: cfg.BootstrapPort}}
	if err := f.startPD(); err != nil {
		return nil, err
	}
	lns, err := f.listen()
	if err != nil {
		f.closePD()
		return nil, err
	}
	for _, w := range f.workers {
		w.prompts = prompts
	}
	if cfg.KVEvents {
		if err := f.startKVPublishers(); err != nil {
			closeListeners(lns)
			f.closePD()
			f.closeKVPublishers()
			return nil, err
		}
	}
	if cfg.Mode == ModeEngine {
		log := newRequestLog(cfg.RequestLog)
		for _, w := range f.workers {
			w.engine = newEngineDriver(w, cfg.engineParams(w.index), cfg.TimeScale, f.done)
			w.engine.log = log
			f.engines.Go(w.engine.run)
		}
	}
	switch {
	case cfg.Protocol == ProtocolGRPC:
		f.server = newGRPCServer(v)
	case cfg.Server == ServerFastHTTP:
		f.server = newFastHTTPServer(f.done)
	default:
		f.server = newGnetServer(f.done, cfg.EventLoops)
	}
	if err := f.server.serve(f.workers, lns); err != nil {
		closeListeners(lns)
		f.closePD()
		if f.pd.rv == nil {
			close(f.done)
		}
		f.engines.Wait()
		f.closeKVPublishers()
		return nil, fmt.Errorf("cannot start the %s server: %w", cfg.Server, err)
	}
	return f, nil
}

// startPD starts what the fleet's prefill-decode role shares: the KV rendezvous of a prefill
// or encode fleet, the KV client of a decode (or an EPD prefill, which claims its
// embeddings: epd.go).
func (f *Fleet) startPD() error {
	switch f.cfg.Role {
	case RolePrefill, RoleEncode:
		rv, err := startRendezvous(net.JoinHostPort(f.cfg.Host, strconv.Itoa(f.cfg.BootstrapPort)), f.cfg.KVTransferTimeout, f.done)
		if err != nil {
			return fmt.Errorf("cannot listen for the KV rendezvous (--bootstrap-port): %w", err)
		}
		f.pd.rv, f.pd.bootstrapPort = rv, rv.port()
		if f.cfg.Role == RolePrefill {
			f.pd.client = newKVClient()
		}
	case RoleDecode:
		f.pd.client = newKVClient()
	}
	return nil
}

// closePD closes what startPD started, on a start that failed.
func (f *Fleet) closePD() {
	if f.pd.rv != nil {
		close(f.done)
		_ = f.pd.rv.close()
	}
	if f.pd.client != nil {
		f.pd.client.close()
	}
}

// listen opens one listener per worker (consecutive ports from Port, or free ones; TLS when
// configured) and makes the workers. On an error it closes what it opened.
func (f *Fleet) listen() ([]net.Listener, error) {
	cfg := &f.cfg
	var tlsConfig *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("cannot load the TLS certificate (--tls-cert %s, --tls-key %s): %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	lns := make([]net.Listener, 0, cfg.Count)
	born := time.Now().Unix()
	for i := range cfg.Count {
		port := 0
		if cfg.Port != 0 {
			port = cfg.Port + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
		if err != nil {
			closeListeners(lns)
			return nil, fmt.Errorf("cannot listen for worker %d: %w", i, err)
		}
		addr := ln.Addr().String()
		if tlsConfig != nil {
			ln = tls.NewListener(ln, tlsConfig)
		}
		lns = append(lns, ln)
		w := newWorker(i, addr, cfg, born)
		w.pdf = f.pd
		w.done = f.done
		f.workers = append(f.workers, w)
	}
	return lns, nil
}

func closeListeners(lns []net.Listener) {
	for _, ln := range lns {
		_ = ln.Close()
	}
}

// startKVPublishers starts each worker's KV event publisher (consecutive ports from
// KVEventsPort, the replay ports after them, or free ones).
func (f *Fleet) startKVPublishers() error {
	cfg := &f.cfg
	for i, w := range f.workers {
		pubPort, replayPort := 0, 0
		if cfg.KVEventsPort != 0 {
			pubPort, replayPort = cfg.KVEventsPort+i, cfg.KVEventsPort+cfg.Count+i
		}
		p, err := startKVPublisher(cfg, cfg.Host, pubPort, replayPort)
		if err != nil {
			return fmt.Errorf("worker %d: %w", i, err)
		}
		w.kvpub = p
	}
	return nil
}

// Workers returns the workers in port order; the slice must not be modified.
func (f *Fleet) Workers() []*Worker { return f.workers }

// Addrs returns every worker's "host:port" in worker order.
func (f *Fleet) Addrs() []string {
	out := make([]string, len(f.workers))
	for i, w := range f.workers {
		out[i] = w.addr
	}
	return out
}

// URLs returns every worker's base URL ("http://host:port") in worker order.
func (f *Fleet) URLs() []string {
	out := make([]string, len(f.workers))
	for i, w := range f.workers {
		out[i] = w.URL()
	}
	return out
}

// Config returns the fleet's configuration with defaults applied.
func (f *Fleet) Config() Config { return f.cfg }

// BootstrapPort is the port of a prefill fleet's KV rendezvous (its bound port when
// Config.BootstrapPort was 0), or for any other fleet the configured Config.BootstrapPort.
func (f *Fleet) BootstrapPort() int { return f.pd.bootstrapPort }

// KVEntries is the number of keys a prefill fleet's rendezvous holds: records not yet
// expired (claimed or not) and keys decodes are waiting for. 0 for other fleets.
func (f *Fleet) KVEntries() int {
	if f.pd.rv == nil {
		return 0
	}
	return f.pd.rv.size()
}

// Close stops every worker: listeners close, in-flight streams, delays and hangs are cut
// short, connections are dropped. It waits for the fleet's goroutines and is idempotent.
func (f *Fleet) Close() error {
	f.closeOnce.Do(func() {
		close(f.done)
		f.closeErr = f.server.close()
		f.engines.Wait()
		f.closeKVPublishers()
		if f.pd.rv != nil {
			f.closeErr = errors.Join(f.closeErr, f.pd.rv.close())
		}
		if f.pd.client != nil {
			f.pd.client.close()
		}
	})
	return f.closeErr
}

// closeKVPublishers closes the workers' event publishers once their engines have stopped.
func (f *Fleet) closeKVPublishers() {
	for _, w := range f.workers {
		if w.kvpub != nil {
			w.kvpub.close()
		}
	}
}

// errClosed reports a fleet closing under a request that was waiting.
var errClosed = errors.New("mockworker closed")

// sleepUntil waits for the deadline; false means the fleet closed first.
func sleepUntil(done <-chan struct{}, deadline time.Time) bool {
	return sleepUntilOr(done, nil, deadline)
}
