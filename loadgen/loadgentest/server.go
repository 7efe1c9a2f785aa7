package loadgentest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// Options configure a fake engine. The zero value answers instantly, reports usage and
// never fails.
type Options struct {
	// WorkerID, when set, is sent in the x-mock-worker-id response header.
	WorkerID string
	// TokenDelay pauses before each streamed token after the first.
	TokenDelay time.Duration
	// FailEvery makes every n-th request (1-based) answer 503 with an OpenAI error body. 0: never.
	FailEvery int
	// OmitUsage leaves out usage (and /generate meta_info), to exercise token-count fallbacks.
	OmitUsage bool
	// OmitDone ends streams without "data: [DONE]".
	OmitDone bool
	// IgnoreStream answers stream requests with one JSON body, as some servers do.
	IgnoreStream bool
	// CacheBlock is the prefix cache's block size in words: a prompt's cached_tokens is the
	// number of words in its leading blocks seen before, in any earlier prompt. Default 16.
	CacheBlock int
	// Record, when set, sees every request (valid only during the call).
	Record func(req *fasthttp.Request)
	// TLS serves HTTPS with a self-signed certificate for 127.0.0.1.
	TLS bool
}

// Server is a running fake engine.
type Server struct {
	// BaseURL is "http://<addr>/v1", ready for loadgen.Config.BaseURL.
	BaseURL string
	// Addr is the listening host:port.
	Addr string

	opts     Options
	ln       net.Listener
	srv      *fasthttp.Server
	served   chan error
	requests atomic.Int64
	parsers  fastjson.ParserPool

	cacheMu sync.Mutex
	cache   map[uint64]struct{}
}

// Start serves a fake engine on a free port of 127.0.0.1.
func Start(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s, err := Serve(ln, opts)
	if err != nil {
		_ = ln.Close()
	}
	return s, err
}

// Serve serves a fake engine on ln until Close.
func Serve(ln net.Listener, opts Options) (*Server, error) {
	if opts.CacheBlock <= 0 {
		opts.CacheBlock = 16
	}
	s := &Server{
		opts:   opts,
		ln:     ln,
		Addr:   ln.Addr().String(),
		served: make(chan error, 1),
		cache:  map[uint64]struct{}{},
	}
	s.BaseURL = "http://" + s.Addr + "/v1"
	s.srv = &fasthttp.Server{Handler: s.handle, Name: "loadgentest", NoDefaultDate: true, NoDefaultContentType: true, Logger: quiet{}}
	if !opts.TLS {
		go func() { s.served <- s.srv.Serve(ln) }()
		return s, nil
	}
	cert, key, err := fasthttp.GenerateTestCertificate("127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("cannot make a test certificate: %w", err)
	}
	s.BaseURL = "https://" + s.Addr + "/v1"
	go func() { s.served <- s.srv.ServeTLSEmbed(ln, cert, key) }()
	return s, nil
}

// Requests is how many requests the server has received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close stops the server and waits for its serve loop to end.
func (s *Server) Close() error {
	err := s.srv.Shutdown()
	// Shutdown does nothing when Serve has not registered the listener yet (Close right
	// after Start); closing the listener ourselves makes such a late Serve return at once.
	if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
		err = cerr
	}
	<-s.served // Serve's own error is only the closed listener
	return err
}

type dialect uint8

const (
	chat dialect = iota
	completions
	generate
)

// request is what the fake engine needs from a request body.
type request struct {
	dialect      dialect
	model        string
	stream       bool
	includeUsage bool
	maxTokens    int
	promptTokens int
	cachedTokens int
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	n := s.requests.Add(1)
	if s.opts.Record != nil {
		s.opts.Record(&ctx.Request)
	}
	var r request
	switch string(ctx.Path()) {
	case "/v1/chat/completions":
		r.dialect = chat
	case "/v1/completions":
		r.dialect = completions
	case "/generate":
		r.dialect = generate
	default:
		ctx.Error(`{"error":{"message":"not found","type":"invalid_request_error"}}`, fasthttp.StatusNotFound)
		return
	}
	if s.opts.WorkerID != "" {
		ctx.Response.Header.Set("x-mock-worker-id", s.opts.WorkerID)
	}
	if s.opts.FailEvery > 0 && n%int64(s.opts.FailEvery) == 0 {
		ctx.SetContentType("application/json")
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString(`{"error":{"message":"injected failure","type":"server_error","code":503}}`)
		return
	}
	if !s.parse(ctx.PostBody(), &r) {
		ctx.SetContentType("application/json")
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetBodyString(`{"error":{"message":"invalid JSON body","type":"invalid_request_error"}}`)
		return
	}
	if r.stream && !s.opts.IgnoreStream {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) { s.writeStream(w, &r) })
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(s.appendWhole(nil, &r))
}

// parse fills r from body and consults the prefix cache.
func (s *Server) parse(body []byte, r *request) bool {
	p := s.parsers.Get()
	defer s.parsers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil {
		return false
	}
	r.model = string(v.GetStringBytes("model"))
	r.stream = v.GetBool("stream")
	r.includeUsage = v.GetBool("stream_options", "include_usage")
	var prompt [][]byte
	switch r.dialect {
	case chat:
		r.maxTokens = v.GetInt("max_tokens")
		for _, m := range v.GetArray("messages") {
			prompt = append(prompt, m.GetStringBytes("content"))
		}
	case completions:
		r.maxTokens = v.GetInt("max_tokens")
		prompt = append(prompt, v.GetStringBytes("prompt"))
	case generate:
		r.maxTokens = v.GetInt("sampling_params", "max_new_tokens")
		r.includeUsage = true
		prompt = append(prompt, v.GetStringBytes("text"))
	}
	r.maxTokens = max(r.maxTokens, 1)
	r.promptTokens, r.cachedTokens = s.lookupPrefix(prompt)
	return true
}

// lookupPrefix counts the words of the prompt parts and how many lead blocks were cached,
// then caches every block.
func (s *Server) lookupPrefix(parts [][]byte) (words, cached int) {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	var blocks []uint64
	inWord := false
	for _, part := range parts {
		for _, c := range part {
			space := c == ' ' || c == '\n' || c == '\t' || c == '\r'
			if !space {
				h = (h ^ uint64(c)) * prime64
				if !inWord {
					words++
				}
			} else if inWord {
				h = (h ^ ' ') * prime64
				if words%s.opts.CacheBlock == 0 {
					blocks = append(blocks, h)
				}
			}
			inWord = !space
		}
		if inWord {
			h = (h ^ ' ') * prime64
			if words%s.opts.CacheBlock == 0 {
				blocks = append(blocks, h)
			}
		}
		inWord = false
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	hit := true
	for _, b := range blocks {
		if _, ok := s.cache[b]; ok && hit {
			cached += s.opts.CacheBlock
		} else {
			hit = false
		}
		s.cache[b] = struct{}{}
	}
	return words, cached
}

// quiet drops fasthttp's connection-level log lines (clients that hang up, failed TLS
// handshakes): tests provoke them on purpose.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
