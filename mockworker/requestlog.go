package mockworker

import (
	"io"
	"strconv"
	"sync"
	"time"
)

// requestLog writes Config.RequestLog: one JSON object per line, for a routing study of a
// real run (docs/benchmarks-history.md). Two kinds of line:
//
//	{"ev":"req","w":3,"arr_us":…,"prompt":1210,"cached":0,"out":32,"run":4,"wait":1,"aw":2,"aw_tok":1630,"busy_ms":7.9,"ttft_ms":131.2,"e2e_ms":402.5}
//	{"ev":"load","w":3,"t_us":…,"run":5,"wait":0,"wait_tok":0}
//
// A "req" line is written when a sequence's last token is out (a cancelled one writes
// nothing): w the worker's index, arr_us its arrival at the engine (wall clock, Unix µs, so
// the lines of several processes and loadgen's can be joined), its prompt and cached tokens and
// maximum output, the engine's state at its arrival (run: sequences in the batch, wait:
// queued, aw: sequences of either still before their first token, aw_tok: the prompt tokens
// those have yet to compute, busy_ms: model time left of the step in progress), and its
// TTFT and end-to-end time in model time. A "load" line is one /v1/loads answer: the running and waiting counts and waiting uncached tokens a gateway was told.
//
// Lines are formatted into a buffer of the caller's and written whole under one mutex, so
// the fleet's workers share a file; a write error stops the log (never the engines).
type requestLog struct {
	mu     sync.Mutex
	w      io.Writer
	failed bool
	buf    []byte
}

func newRequestLog(w io.Writer) *requestLog {
	if w == nil {
		return nil
	}
	return &requestLog{w: w}
}

// arrivalState is an engine's state when a sequence arrived (requestLog's run, wait, aw,
// aw_tok, busy_ms).
type arrivalState struct {
	running, waiting int
	awaiting         int
	awaitingTokens   int
	busyLeft         time.Duration
}

// arrivalState returns e's state at model time now, before a new sequence joins.
func (e *engine) arrivalState(now time.Duration) arrivalState {
	st := arrivalState{running: len(e.running), waiting: len(e.waiting), busyLeft: max(0, e.busyUntil-now)}
	for _, s := range e.running {
		if s.generated == 0 {
			st.awaiting++
			st.awaitingTokens += s.promptTokens - s.prefilled
		}
	}
	for _, s := range e.waiting {
		st.awaiting++
		st.awaitingTokens += s.promptTokens
	}
	return st
}

// request logs the finished sequence s of worker index, whose engine's epoch is epoch.
func (l *requestLog) request(index int, epoch time.Time, scale float64, s *seq) {
	l.writeLine(func(b []byte) []byte {
		b = appendKeyInt(b, `{"ev":"req","w":`, int64(index))
		b = appendKeyInt(b, `,"arr_us":`, epoch.Add(time.Duration(float64(s.arrival)/scale)).UnixMicro())
		b = appendKeyInt(b, `,"prompt":`, int64(s.promptTokens))
		b = appendKeyInt(b, `,"cached":`, int64(s.cached))
		b = appendKeyInt(b, `,"out":`, int64(s.maxTokens))
		st := s.atArrival
		b = appendKeyInt(b, `,"run":`, int64(st.running))
		b = appendKeyInt(b, `,"wait":`, int64(st.waiting))
		b = appendKeyInt(b, `,"aw":`, int64(st.awaiting))
		b = appendKeyInt(b, `,"aw_tok":`, int64(st.awaitingTokens))
		b = appendKeyMillis(b, `,"busy_ms":`, st.busyLeft)
		b = appendKeyMillis(b, `,"ttft_ms":`, s.firstToken-s.arrival)
		b = appendKeyMillis(b, `,"e2e_ms":`, s.lastToken-s.arrival)
		return append(b, "}\n"...)
	})
}

// load logs the report l worker index answered at wall time now.
func (l *requestLog) load(index int, now time.Time, r loadReport) {
	l.writeLine(func(b []byte) []byte {
		b = appendKeyInt(b, `{"ev":"load","w":`, int64(index))
		b = appendKeyInt(b, `,"t_us":`, now.UnixMicro())
		b = appendKeyInt(b, `,"run":`, int64(r.running))
		b = appendKeyInt(b, `,"wait":`, int64(r.waiting))
		b = appendKeyInt(b, `,"wait_tok":`, int64(r.waitingUncachedToks))
		return append(b, "}\n"...)
	})
}

// writeLine formats one line with format into the log's buffer and writes it whole, under the
// mutex; once a write failed it writes nothing.
func (l *requestLog) writeLine(format func(b []byte) []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed {
		return
	}
	l.buf = format(l.buf[:0])
	if _, err := l.w.Write(l.buf); err != nil {
		l.failed = true
	}
}

// appendKeyMillis appends key, as appendKeyInt does, and d in milliseconds with three
// decimals.
func appendKeyMillis(b []byte, key string, d time.Duration) []byte {
	return strconv.AppendFloat(append(b, key...), float64(d)/float64(time.Millisecond), 'f', 3, 64)
}
