package telemetry

import (
	"context"
	"encoding/hex"
	"log/slog"
	"strconv"
	"time"

	"github.com/smg-go/smg/internal/clock"
)

// samplingWindow is the window of Config.ErrorLinesPerSecond.
const samplingWindow = time.Second

// Messages of the request lines (the access log's and the error lines').
const (
	msgAccess     = "Request"
	msgFailed     = "Request failed"
	msgSuppressed = "Request failure lines suppressed"
)

// requestLog writes the access log and the error lines. Only the sink's goroutine uses it.
type requestLog struct {
	log       *slog.Logger
	access    bool
	perSecond int
	// windows are the error lines' sampling windows, by error code ("status 502" for a
	// worker's own error answer).
	windows map[string]*errorWindow
	attrs   []slog.Attr // scratch
}

type errorWindow struct {
	start      time.Time
	logged     int
	suppressed int
}

func newRequestLog(l *slog.Logger, access bool, perSecond int) *requestLog {
	return &requestLog{log: l, access: access, perSecond: perSecond, windows: map[string]*errorWindow{}}
}

// record logs r's access line and, for an error answer, its error line (sampled per code).
func (l *requestLog) record(r *Record, c clock.Clock) {
	ctx := context.Background()
	if l.access && l.log.Enabled(ctx, slog.LevelInfo) {
		l.log.LogAttrs(ctx, slog.LevelInfo, msgAccess, l.requestAttrs(r, false)...)
	}
	if !failed(r) {
		return
	}
	level := slog.LevelWarn
	if r.Status >= 500 || r.Status < 400 { // a stream broken off after its 200 is the worker's fault
		level = slog.LevelError
	}
	if !l.log.Enabled(ctx, level) {
		return
	}
	now := c.Now() // read for failures only: most records have no error line
	code := r.ErrorCode
	if code == "" {
		code = "status " + strconv.Itoa(r.Status)
	}
	w := l.windows[code]
	if w == nil {
		w = &errorWindow{start: now}
		l.windows[code] = w
	}
	if now.Sub(w.start) >= samplingWindow {
		l.flush(code, w)
		*w = errorWindow{start: now}
	}
	if w.logged >= l.perSecond {
		w.suppressed++
		return
	}
	w.logged++
	l.log.LogAttrs(ctx, level, msgFailed, l.requestAttrs(r, true)...)
}

// failed reports whether r ended in an error answer: a 4xx or 5xx, or a stream that began
// with 200 and ended in the gateway's error event. A request the client left before its
// answer (499) did not fail.
func failed(r *Record) bool {
	return r.Status != 499 && (r.Status >= 400 || r.ErrorCode != "")
}

// flushSuppressed reports, for every error code whose window has ended by now, the lines it
// suppressed.
func (l *requestLog) flushSuppressed(now time.Time) {
	for code, w := range l.windows {
		if now.Sub(w.start) >= samplingWindow {
			l.flush(code, w)
			delete(l.windows, code)
		}
	}
}

func (l *requestLog) flush(code string, w *errorWindow) {
	if w.suppressed > 0 {
		l.log.LogAttrs(context.Background(), slog.LevelWarn, msgSuppressed,
			slog.String("error_code", code), slog.Int("suppressed", w.suppressed),
			slog.Int("logged", w.logged), slog.Duration("window", samplingWindow))
	}
}

// requestAttrs are a request line's fields; withCause adds why it failed.
func (l *requestLog) requestAttrs(r *Record, withCause bool) []slog.Attr {
	worker := ""
	if r.Worker != nil {
		worker = r.Worker.URL
	}
	a := append(l.attrs[:0],
		slog.String("request_id", r.ID()),
		slog.String("path", r.Route),
		slog.String("model", r.Model),
		slog.String("worker", worker),
		slog.Int("status", r.Status),
		slog.String("error_code", r.ErrorCode),
		slog.Bool("stream", r.Stream),
		slog.Int("attempts", int(r.Attempts)),
		slog.Float64("ttft_ms", millis(r.FirstToken, r.Start)),
		slog.Float64("duration_ms", millis(r.End, r.Start)),
		slog.Int("prompt_tokens", int(r.PromptTokens)),
		slog.Int("completion_tokens", int(r.CompletionTokens)),
	)
	if r.TraceID != ([16]byte{}) {
		a = append(a, slog.String("trace_id", hex.EncodeToString(r.TraceID[:])))
	}
	if withCause {
		cause := r.Cause
		if cause == "" {
			cause = "the worker answered " + strconv.Itoa(r.Status)
		}
		a = append(a, slog.String("cause", cause))
	}
	l.attrs = a
	return a
}

// millis is end-start in milliseconds to the microsecond, -1 when end did not happen.
func millis(end, start int64) float64 {
	if end == 0 || end < start {
		return -1
	}
	return float64((end-start)/int64(time.Microsecond)) / 1000
}
