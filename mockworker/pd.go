package mockworker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/valyala/fastjson"
	"github.com/zeebo/xxh3"

	"github.com/smg-go/smg/internal/jsonx"
)

// Prefill-decode disaggregation (doc.go, "Prefill-decode roles"). A prefill worker computes
// the prompt and publishes a record of its KV (a fingerprint of the prompt) on its fleet's
// rendezvous (rendezvous.go) under a key; a decode worker claims that record there (over
// its fleet's one connection to that rendezvous) before it generates, and fails the request when the record never comes or describes
// another prompt. So a gateway that pairs, injects or forwards wrongly sees an error here,
// never a silent success. A unified worker (Role "") never reaches this file.

// pdResult is the outcome of one PD request at a worker, a label of
// mockworker_pd_requests_total.
type pdResult uint8

const (
	pdOK pdResult = iota
	pdRejected
	pdTimeout
	pdMismatch
	pdUnreachable
	pdResults // the number of results above

	pdClosed // the fleet closed or the client left while the decode waited: not counted
)

var pdResultNames = [pdResults]string{"ok", "rejected", "timeout", "mismatch", "unreachable"}

// PDStats counts a PD worker's generation requests by outcome (all zero for a unified
// worker). A prefill counts OK when it published its KV and Rejected when it answered 400;
// a decode counts OK when it received a matching KV, Rejected for a 400, Timeout when no
// prefill published the key in time, Mismatch when the KV was for another prompt, engine or
// blocks or was already claimed, Unreachable when the rendezvous could not be asked.
type PDStats struct {
	OK, Rejected, Timeout, Mismatch, Unreachable uint64
}

// PDTransfer is one decode request's KV fetch, as Worker.PDTransfers reports it.
type PDTransfer struct {
	// Key is the bootstrap_room in decimal (sglang) or the remote_request_id (vllm).
	Key string
	// Prefill is the rendezvous "host:port" the decode contacted.
	Prefill string
	// Result is "ok", "timeout", "mismatch" or "unreachable".
	Result string
}

// pdLogSize is how many recent decode transfers a worker remembers.
const pdLogSize = 1024

// pdLog is a ring of the last pdLogSize decode transfers.
type pdLog struct {
	mu   sync.Mutex
	buf  []PDTransfer
	next int
}

func (l *pdLog) add(t PDTransfer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) < pdLogSize {
		l.buf = append(l.buf, t)
		return
	}
	l.buf[l.next] = t
	l.next = (l.next + 1) % pdLogSize
}

func (l *pdLog) list() []PDTransfer {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]PDTransfer, 0, len(l.buf))
	out = append(out, l.buf[l.next:]...)
	return append(out, l.buf[:l.next]...)
}

// PDStats returns the worker's PD request counts.
func (w *Worker) PDStats() PDStats {
	var c [pdResults]uint64
	for i := range c {
		c[i] = w.pdCount[i].Load()
	}
	return PDStats{OK: c[pdOK], Rejected: c[pdRejected], Timeout: c[pdTimeout], Mismatch: c[pdMismatch], Unreachable: c[pdUnreachable]}
}

// PDTransfers returns the worker's last 1024 decode KV fetches, oldest first.
func (w *Worker) PDTransfers() []PDTransfer { return w.pdLog.list() }

func (w *Worker) countPD(r pdResult) {
	if r < pdResults {
		w.pdCount[r].Add(1)
	}
}

// pdShared is a fleet's PD machinery, shared by its workers.
type pdShared struct {
	// rv is the prefill fleet's rendezvous (nil otherwise).
	rv *rendezvous
	// bootstrapPort is the rendezvous's bound port (prefill) or the port a decode contacts
	// for a null bootstrap_port.
	bootstrapPort int
	// client fetches KV records (decode fleets).
	client *kvClient
	// blocks numbers the vLLM block ids prefills hand out.
	blocks atomic.Uint64
}

// pdFields are the PD fields of a request body, copied out of the parser.
type pdFields struct {
	// SGLang: bootstrap_host, bootstrap_port (0 when null), bootstrap_room.
	host string
	port int
	room uint64
	// vLLM decode: kv_transfer_params as the prefill returned it.
	engineID   string
	remoteHost string
	remotePort int
	xferID     string
	blockIDs   []int
}

// parsePDFields reads and checks the PD fields a worker of role and dialect needs from the
// body v (a JSON object). Errors are 400s that say what the gateway must send.
func parsePDFields(v *fastjson.Value, d Dialect, role Role) (pdFields, error) {
	var f pdFields
	if d == DialectVLLM {
		return f, f.readVLLM(v, role)
	}
	return f, f.readSGLang(v, role)
}

// otherDialectHint is what an error about a missing PD field adds when the body carries key,
// the other engine's (theirs) PD field instead: the gateway speaks the wrong protocol to this
// worker of dialect ours. Empty without key.
func otherDialectHint(v *fastjson.Value, key, theirs string, ours Dialect) string {
	if member(v, key) == nil {
		return ""
	}
	return " (" + key + " is " + theirs + "'s protocol; this worker speaks " + string(ours) + "'s)"
}

func (f *pdFields) readSGLang(v *fastjson.Value, role Role) error {
	room := setMember(v, "bootstrap_room")
	if room == nil {
		return fmt.Errorf("%s worker got a request without bootstrap_room: the gateway must add bootstrap_host, bootstrap_port and bootstrap_room%s",
			role, otherDialectHint(v, "kv_transfer_params", "vLLM", DialectSGLang))
	}
	n, err := room.Uint64()
	if err != nil || n>>63 != 0 {
		return fmt.Errorf("%s worker: bootstrap_room must be an integer in 0..2^63-1, got %s", role, clip(room.String()))
	}
	f.room = n
	host := member(v, "bootstrap_host")
	if host == nil || host.Type() != fastjson.TypeString || len(host.GetStringBytes()) == 0 {
		return fmt.Errorf("%s worker got a request without bootstrap_host (a string: the prefill worker's host)", role)
	}
	f.host = string(host.GetStringBytes())
	port := member(v, "bootstrap_port")
	if port == nil {
		return fmt.Errorf("%s worker got a request without bootstrap_port (an integer, or null for the default port)", role)
	}
	if port.Type() != fastjson.TypeNull {
		p, err := port.Int()
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("%s worker: bootstrap_port must be null or an integer in 1..65535, got %s", role, clip(port.String()))
		}
		f.port = p
	}
	return nil
}

func (f *pdFields) readVLLM(v *fastjson.Value, role Role) error {
	kv := setMember(v, "kv_transfer_params")
	if kv == nil {
		return fmt.Errorf("%s worker got a request without kv_transfer_params%s", role, otherDialectHint(v, "bootstrap_room", "SGLang", DialectVLLM))
	}
	if kv.Type() != fastjson.TypeObject {
		return errors.New("kv_transfer_params must be an object")
	}
	remoteDecode, remotePrefill := boolOf(member(kv, "do_remote_decode")), boolOf(member(kv, "do_remote_prefill"))
	if role == RolePrefill {
		if remotePrefill {
			return errors.New("prefill worker got kv_transfer_params.do_remote_prefill true: that request belongs on a decode worker")
		}
		if !remoteDecode {
			return errors.New("prefill worker needs kv_transfer_params.do_remote_decode true")
		}
		return nil
	}
	if remoteDecode {
		return errors.New("decode worker got kv_transfer_params.do_remote_decode true: that request belongs on a prefill worker")
	}
	if !remotePrefill {
		return errors.New("decode worker needs kv_transfer_params.do_remote_prefill true (the object the prefill returned)")
	}
	str := func(key string) (string, error) {
		s := member(kv, key)
		if s == nil || s.Type() != fastjson.TypeString || len(s.GetStringBytes()) == 0 {
			return "", fmt.Errorf("decode worker needs kv_transfer_params.%s (a non-empty string, as the prefill returned it)", key)
		}
		return string(s.GetStringBytes()), nil
	}
	var err error
	if f.engineID, err = str("remote_engine_id"); err != nil {
		return err
	}
	if f.remoteHost, err = str("remote_host"); err != nil {
		return err
	}
	if f.xferID, err = str("remote_request_id"); err != nil {
		return err
	}
	p := member(kv, "remote_port")
	if p == nil {
		return errors.New("decode worker needs kv_transfer_params.remote_port (an integer)")
	}
	if f.remotePort, err = p.Int(); err != nil || f.remotePort < 1 || f.remotePort > 65535 {
		return fmt.Errorf("decode worker: kv_transfer_params.remote_port must be an integer in 1..65535, got %s", clip(p.String()))
	}
	ids := member(kv, "remote_block_ids")
	if ids == nil || ids.Type() != fastjson.TypeArray {
		return errors.New("decode worker needs kv_transfer_params.remote_block_ids (an array of integers)")
	}
	arr := ids.GetArray()
	f.blockIDs = make([]int, 0, len(arr))
	for _, id := range arr {
		n, err := id.Int()
		if err != nil || n < 0 {
			return fmt.Errorf("decode worker: kv_transfer_params.remote_block_ids holds %s, not a block id", clip(id.String()))
		}
		f.blockIDs = append(f.blockIDs, n)
	}
	return nil
}

// clip shortens a JSON value quoted in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// promptFingerprint names a prompt: its text and token ids, as the KV computed from it.
func promptFingerprint(text []byte, ids []uint32) uint64 {
	h := xxh3.New()
	_, _ = h.Write(text)
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], id)
		_, _ = h.Write(b[:])
	}
	return h.Sum64() ^ uint64(len(text))<<32 ^ uint64(len(ids))
}

// pdState is a PD request's part of a reply: for a prefill in engine mode the record to
// publish when its prefill completes; for a decode what to fetch and expect.
type pdState struct {
	decode bool
	key    string // the rendezvous key: bootstrap_room in decimal, or the vLLM transfer id
	label  string // "bootstrap_room N" or "remote_request_id X", for messages
	addr   string // decode: the rendezvous "host:port" to ask
	rec    kvRecord
	// enc, on an EPD prefill, is the embedding record to claim first (epd.go).
	enc *encodeClaim
}

// fetches reports whether the transport must fetch something (resolvePD) before the answer.
func (pd *pdState) fetches() bool { return pd.decode || pd.enc != nil }

// parsePD parses a PD worker's request: the ordinary fields, then the role's PD fields,
// checked against this worker. It returns the request and its PD state.
func (w *Worker) parsePD(p *fastjson.Parser, kind genKind, body, scratch []byte, idScratch []uint32) (genRequest, *pdState, error) {
	req := genRequest{kind: kind, prompt: scratch[:0], ids: idScratch[:0]}
	v, err := p.ParseBytes(body)
	if err != nil {
		return req, nil, fmt.Errorf("request body is not valid JSON: %w", err)
	}
	if err := req.read(v); err != nil {
		return req, nil, err
	}
	if w.cfg.Role == RoleEncode {
		pd, err := w.parseEncode(v, &req)
		if pd != nil {
			pd.rec = kvRecord{Fingerprint: strconv.FormatUint(promptFingerprint(req.prompt, req.ids), 16), PromptTokens: req.promptTokens, Worker: w.id}
		}
		return req, pd, err
	}
	f, err := parsePDFields(v, w.cfg.Dialect, w.cfg.Role)
	if err != nil {
		return req, nil, err
	}
	if w.cfg.Dialect == DialectVLLM && w.cfg.Role == RolePrefill {
		if setMember(v, "stream_options") != nil && !req.stream {
			// vLLM refuses stream_options on a request that does not stream; its proxy drops them.
			return req, nil, errors.New("prefill worker got stream_options with stream false: vLLM rejects that; drop stream_options from the prefill request")
		}
	}
	pd, err := w.newPDState(f, promptFingerprint(req.prompt, req.ids), req.promptTokens, req.stream, req.maxTokens)
	if err != nil {
		return req, nil, err
	}
	if w.cfg.Dialect == DialectSGLang && !pd.decode {
		if pd.enc, err = w.parseEncodeHandshake(v); err != nil {
			return req, nil, err
		}
	}
	return req, pd, nil
}

// newPDState checks a PD request's fields f against this worker's role and dialect (HTTP and
// gRPC requests alike) and returns what the reply publishes or fetches. fingerprint and
// promptTokens name the prompt; stream and maxTokens are checked on a vLLM prefill.
func (w *Worker) newPDState(f pdFields, fingerprint uint64, promptTokens int, stream bool, maxTokens int) (*pdState, error) {
	pd := &pdState{decode: w.cfg.Role == RoleDecode}
	pd.rec = kvRecord{Fingerprint: strconv.FormatUint(fingerprint, 16), PromptTokens: promptTokens, Worker: w.id}
	switch {
	case w.cfg.Dialect == DialectSGLang:
		pd.key = strconv.FormatUint(f.room, 10)
		pd.label = "bootstrap_room " + pd.key
		if pd.decode {
			port := f.port
			if port == 0 {
				port = w.pdf.bootstrapPort
			}
			pd.addr = net.JoinHostPort(f.host, strconv.Itoa(port))
			break
		}
		if !w.isOwnHost(f.host) {
			return nil, fmt.Errorf("bootstrap_host %q is not this prefill worker (%s): the gateway paired the request with another prefill", f.host, w.addr)
		}
		if f.port != 0 && f.port != w.pdf.bootstrapPort {
			return nil, fmt.Errorf("bootstrap_port %d is not this prefill worker's bootstrap port (%d)", f.port, w.pdf.bootstrapPort)
		}
	case pd.decode: // vLLM
		pd.key = f.xferID
		pd.label = "remote_request_id " + f.xferID
		pd.addr = net.JoinHostPort(f.remoteHost, strconv.Itoa(f.remotePort))
		pd.rec.EngineID, pd.rec.BlockIDs = f.engineID, f.blockIDs
	default: // vLLM prefill: the proxy's first leg is a one-token, non-streamed request
		if stream {
			return nil, errors.New(`prefill worker got "stream": true: vLLM's prefill request is not streamed`)
		}
		if maxTokens != 1 {
			return nil, fmt.Errorf("prefill worker needs max_tokens 1 (chat: max_completion_tokens 1), got %d", maxTokens)
		}
		var id [16]byte
		binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
		pd.key = fmt.Sprintf("mock-xfer-%x", id)
		pd.label = "remote_request_id " + pd.key
		pd.rec.EngineID = w.kvEngineID
		n := max((promptTokens+w.cfg.BlockSize-1)/w.cfg.BlockSize, 1)
		base := int(w.pdf.blocks.Add(uint64(n))) - n
		pd.rec.BlockIDs = make([]int, n)
		for i := range pd.rec.BlockIDs {
			pd.rec.BlockIDs[i] = base + i
		}
	}
	return pd, nil
}

// isOwnHost reports whether host names this worker's listening address.
func (w *Worker) isOwnHost(host string) bool {
	if host == w.host || host == w.cfg.Host {
		return true
	}
	ip := net.ParseIP(w.host)
	return ip != nil && ip.IsUnspecified() // listening everywhere: any name may reach it
}

// appendKVParams writes the kv_transfer_params a vLLM prefill returns for the decode.
func (w *Worker) appendKVParams(dst []byte, pd *pdState) []byte {
	dst = append(dst, `{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"`...)
	dst = jsonx.AppendEscaped(dst, pd.rec.EngineID)
	dst = append(dst, `","remote_block_ids":[`...)
	for i, id := range pd.rec.BlockIDs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	dst = append(dst, `],"remote_host":"`...)
	dst = jsonx.AppendEscaped(dst, w.host)
	dst = append(dst, `","remote_port":`...)
	dst = strconv.AppendInt(dst, int64(w.pdf.bootstrapPort), 10)
	dst = append(dst, `,"remote_request_id":"`...)
	dst = jsonx.AppendEscaped(dst, pd.key)
	return append(dst, `","tp_size":1}`...)
}

// preparePD finishes a PD reply once the answer a is known: a prefill answers one token and
// publishes its KV (at once in instant mode; in engine mode when its prefill completes,
// see publishingSource); a decode waits for its KV in the transport (resolvePD).
// It returns a vLLM prefill's kv_transfer_params for the answer, or false and a 400 in r
// when the request cannot go on.
func (w *Worker) preparePD(pd *pdState, r *reply, dst []byte) (kvParams []byte, ok bool) {
	if pd.decode {
		r.pd = pd
		return nil, true
	}
	if w.cfg.Dialect == DialectVLLM {
		kvParams = w.appendKVParams(nil, pd)
	}
	if w.engine == nil {
		if pd.enc != nil {
			r.pd = pd // published once the embeddings arrived (resolveEncode)
			return kvParams, true
		}
		if err := w.pdf.rv.publish(pd.key, pd.rec); err != nil {
			*r = badRequest(dst, fmt.Errorf("%s: %w", pd.label, err))
			return nil, false
		}
		w.countPD(pdOK)
		return kvParams, true
	}
	if w.pdf.rv.published(pd.key) {
		*r = badRequest(dst, fmt.Errorf("%s: %w", pd.label, errKeyInUse))
		return nil, false
	}
	r.pd = pd
	return kvParams, true
}

// publishingSource publishes a prefill's KV when its first token (the end of its prefill)
// exists. Used by one goroutine.
type publishingSource struct {
	tokenSource
	w    *Worker
	pd   *pdState
	done bool
}

func (p *publishingSource) await(have int, done, gone <-chan struct{}) (int, bool) {
	n, ok := p.tokenSource.await(have, done, gone)
	if ok && n >= 1 && !p.done {
		p.done = true
		if err := p.w.pdf.rv.publish(p.pd.key, p.pd.rec); err != nil {
			p.w.countPD(pdRejected) // a twin published the key meanwhile; the decode will say so
		} else {
			p.w.countPD(pdOK)
		}
	}
	return n, ok
}

// resolvePD fetches a decode's KV record from its prefill's rendezvous and checks it against
// the request's prompt. On a failure it turns r into the 500 the engine would answer. It
// returns false when done or gone closed first (the answer is abandoned).
func (w *Worker) resolvePD(r *reply, done, gone <-chan struct{}) bool {
	pd := r.pd
	if pd.enc != nil {
		return w.resolveEncode(r, done, gone)
	}
	res, err := w.fetchPD(pd, done, gone)
	if res == pdClosed {
		return false
	}
	if res == pdOK {
		if r.seq != nil {
			r.seq.remote = true
		}
		return true
	}
	w.served.Add(^uint64(0)) // not a generation after all
	r.answer, r.seq, r.stream, r.pd = nil, nil, false, nil
	r.status, r.contentType = 500, contentJSON
	r.body = appendErrorBody(nil, 500, "kv_transfer_error", err.Error())
	return true
}

// fetchPD claims a decode's KV record from its prefill's rendezvous and checks it against the
// request's prompt, counting and logging the outcome; err says why when it is not pdOK. It
// returns pdClosed when done or gone closed first.
func (w *Worker) fetchPD(pd *pdState, done, gone <-chan struct{}) (pdResult, error) {
	timeout := w.cfg.KVTransferTimeout
	got, res, err := w.pdf.client.fetch(pd.addr, pd.key, timeout, done, gone)
	if res == pdClosed {
		return res, nil
	}
	if res == pdOK {
		switch {
		case got.Fingerprint != pd.rec.Fingerprint || got.PromptTokens != pd.rec.PromptTokens:
			res, err = pdMismatch, fmt.Errorf("KV transfer mismatch for %s: the prefill worker %s saw a different prompt (%d prompt tokens there, %d here)",
				pd.label, got.Worker, got.PromptTokens, pd.rec.PromptTokens)
		case w.cfg.Dialect == DialectVLLM && got.EngineID != pd.rec.EngineID:
			res, err = pdMismatch, fmt.Errorf("KV transfer mismatch for %s: remote_engine_id %q, but the prefill's engine is %q", pd.label, pd.rec.EngineID, got.EngineID)
		case w.cfg.Dialect == DialectVLLM && !slices.Equal(got.BlockIDs, pd.rec.BlockIDs):
			res, err = pdMismatch, fmt.Errorf("KV transfer mismatch for %s: remote_block_ids differ from the %d blocks the prefill allocated", pd.label, len(got.BlockIDs))
		}
	} else {
		switch res {
		case pdTimeout:
			err = fmt.Errorf("KV transfer for %s timed out after %v: no prefill arrived", pd.label, timeout)
		case pdMismatch:
			err = fmt.Errorf("KV transfer mismatch for %s: %w", pd.label, err)
		default:
			err = fmt.Errorf("KV transfer for %s failed: cannot reach the prefill's bootstrap server at %s: %w", pd.label, pd.addr, err)
		}
	}
	w.countPD(res)
	w.pdLog.add(PDTransfer{Key: pd.key, Prefill: pd.addr, Result: pdResultNames[res]})
	return res, err
}
