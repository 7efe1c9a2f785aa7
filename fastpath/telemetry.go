package fastpath

import (
	"math"

	"github.com/smg-go/smg/fastpath/evloop"
	"github.com/smg-go/smg/telemetry"
)

// streamTail is how much of a relayed stream's end a request keeps: enough for the last
// SSE chunk's usage object, which the engines send just before "data: [DONE]".
const streamTail = 512

// requestTelemetry is what a generation request gathers for its telemetry.Record as it goes:
// the record itself (times on clock.Nanos's scale, token counts, the error it answered) and
// the tail of a relayed stream, where the engine's usage is. It lives in the loop exchange
// and is reused, so filling and handing over a record allocates nothing.
type requestTelemetry struct {
	rec     telemetry.Record
	tail    [streamTail]byte
	tailLen int
}

// beginRecord starts the record of the request the loop exchange just read, and gives the
// request its id: the client's X-Request-Id, else one made in the spec product's style.
// Every answer carries the id, error answers included, and the record logs it.
func (le *loopExchange) beginRecord(ex *evloop.Exchange) {
	t := &le.tel
	t.rec = telemetry.Record{Start: ex.Nanos(), Route: routePaths[le.route],
		PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1}
	t.tailLen = 0
	if id := ex.Req().Header(headerRequestID); len(id) > 0 {
		le.reqID = append(le.reqID[:0], id...)
	} else {
		le.reqID = appendRequestID(append(le.reqID[:0], requestIDPrefixes[le.route]...))
	}
}

// beginRejected starts the record of a request the loops refused before routing it: its
// id is a new one, as no header of it can be trusted.
func (le *loopExchange) beginRejected(ex *evloop.Exchange) {
	le.tel.rec = telemetry.Record{Start: ex.Nanos(), Route: routePaths[routeOther],
		PromptTokens: -1, CompletionTokens: -1, CachedTokens: -1}
	le.reqID = appendRequestID(append(le.reqID[:0], "req-"...))
}

// failRecord notes the gateway's error answer e, with msg its cause.
func (le *loopExchange) failRecord(e apiError, msg string) {
	le.tel.rec.ErrorCode, le.tel.rec.Cause = e.code, msg
}

// firstToken notes that the answer's body started reaching the client at now (a Nanos
// reading of the server's clock), unless it had already.
func (t *requestTelemetry) firstToken(now int64) {
	if t.rec.FirstToken == 0 {
		t.rec.FirstToken = now
	}
}

// streamPiece notes a piece of a relayed stream: the first is its first token, and the last
// bytes are kept for the usage.
func (t *requestTelemetry) streamPiece(now int64, piece []byte) {
	t.firstToken(now)
	if len(piece) >= streamTail {
		t.tailLen = copy(t.tail[:], piece[len(piece)-streamTail:])
		return
	}
	if keep := streamTail - len(piece); t.tailLen > keep {
		copy(t.tail[:], t.tail[t.tailLen-keep:t.tailLen])
		t.tailLen = keep
	}
	t.tailLen += copy(t.tail[t.tailLen:], piece)
}

// usage notes the token counts of the engine's usage object in b (a whole answer, or a
// stream's tail), when it has one.
func (t *requestTelemetry) usage(b []byte) {
	if p, c, k, ok := telemetry.Usage(b); ok {
		t.rec.PromptTokens, t.rec.CompletionTokens, t.rec.CachedTokens = p, c, k
	}
}

// counted notes the token counts the gateway made itself (gRPC workers: it tokenized the
// prompt and relayed every token).
func (t *requestTelemetry) counted(prompt, cached uint32, completion uint64) {
	t.rec.PromptTokens, t.rec.CachedTokens = int32(min(prompt, math.MaxInt32)), int32(min(cached, math.MaxInt32))
	t.rec.CompletionTokens = int32(min(completion, math.MaxInt32))
}

// endRecord completes the record of a request that ended with status and hands it to the
// telemetry sink. It runs before the attempt ends: the attempt still knows its tries and
// the worker of the last.
func (le *loopExchange) endRecord(status int) {
	s := le.s
	if s.cfg.Telemetry == nil {
		return
	}
	t := &le.tel
	r := &t.rec
	a := &le.attempt
	r.Status, r.End = status, s.clock.Nanos()
	r.Stream, r.PD, r.Attempts, r.Picked = le.fields.Stream, le.pd.on, a.tries, a.picked
	r.Tries, r.RetriesExhausted = a.tryLog, a.exhausted
	r.CacheMatched, r.CacheInput = int32(min(a.cacheMatched, math.MaxInt32)), int32(min(a.cacheInput, math.MaxInt32))
	if n := min(int(a.tries), len(r.Tries)); n > 0 && int(a.tries) == n {
		last := &r.Tries[n-1]
		if last.Ended == 0 {
			last.Ended = r.End
		}
		if last.Status == 0 && last.Failure == telemetry.TryAnswered {
			last.Status = int16(status)
		}
	}
	if r.Worker = a.lastWorker; r.Worker == nil {
		r.Worker = a.first // picked, never sent (its engine client could not be had)
	}
	if le.rt != nil {
		r.Model = le.rt.Model
		if r.Picked != 0 {
			r.Policy = le.rt.Policy
		}
	}
	if w := r.Worker; r.Model == "" && w != nil && len(w.Models) == 1 {
		r.Model = w.Models[0] // a request naming no model: the one its worker serves
	}
	if r.Stream && status < 300 && t.tailLen > 0 && r.CompletionTokens < 0 {
		t.usage(t.tail[:t.tailLen])
	}
	r.IDLen = uint8(copy(r.RequestID[:], le.reqID))
	le.trace.fill(r)
	s.cfg.Telemetry.Submit(r)
}
