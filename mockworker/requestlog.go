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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed {
		return
	}
	b := append(l.buf[:0], `{"ev":"req","w":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"arr_us":`...)
	b = strconv.AppendInt(b, epoch.Add(time.Duration(float64(s.arrival)/scale)).UnixMicro(), 10)
	b = append(b, `,"prompt":`...)
	b = strconv.AppendInt(b, int64(s.promptTokens), 10)
	b = append(b, `,"cached":`...)
	b = strconv.AppendInt(b, int64(s.cached), 10)
	b = append(b, `,"out":`...)
	b = strconv.AppendInt(b, int64(s.maxTokens), 10)
	st := s.atArrival
	b = append(b, `,"run":`...)
	b = strconv.AppendInt(b, int64(st.running), 10)
	b = append(b, `,"wait":`...)
	b = strconv.AppendInt(b, int64(st.waiting), 10)
	b = append(b, `,"aw":`...)
	b = strconv.AppendInt(b, int64(st.awaiting), 10)
	b = append(b, `,"aw_tok":`...)
	b = strconv.AppendInt(b, int64(st.awaitingTokens), 10)
	b = append(b, `,"busy_ms":`...)
	b = appendMillis(b, st.busyLeft)
	b = append(b, `,"ttft_ms":`...)
	b = appendMillis(b, s.firstToken-s.arrival)
	b = append(b, `,"e2e_ms":`...)
	b = appendMillis(b, s.lastToken-s.arrival)
	b = append(b, "}\n"...)
	l.write(b)
}

// load logs the report l worker index answered at wall time now.
func (l *requestLog) load(index int, now time.Time, r loadReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed {
		return
	}
	b := append(l.buf[:0], `{"ev":"load","w":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"t_us":`...)
	b = strconv.AppendInt(b, now.UnixMicro(), 10)
	b = append(b, `,"run":`...)
	b = strconv.AppendInt(b, int64(r.running), 10)
	b = append(b, `,"wait":`...)
	b = strconv.AppendInt(b, int64(r.waiting), 10)
	b = append(b, `,"wait_tok":`...)
	b = strconv.AppendInt(b, int64(r.waitingUncachedToks), 10)
	b = append(b, "}\n"...)
	l.write(b)
}

func (l *requestLog) write(b []byte) {
	l.buf = b
	if _, err := l.w.Write(b); err != nil {
		l.failed = true
	}
}

func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d)/float64(time.Millisecond), 'f', 3, 64)
}
