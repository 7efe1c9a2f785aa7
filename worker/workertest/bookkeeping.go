package workertest

import (
	"github.com/smg-go/smg/worker"
	"github.com/smg-go/smg/worker/internal/testhooks"
)

// The request path keeps a worker's bookkeeping through worker.Hold, which moves several
// counters at once (the in-flight count among them); the functions below move one each, so
// that a test sets exactly the load it describes. Tests only: production code holds a Hold.

var notes = testhooks.Get[*worker.Worker]()

// NoteDispatch credits w with a request of tokens tokens (-1: unknown) dispatched to it, the
// since-report credit the expected-wait score reads (Hold.Begin).
func NoteDispatch(w *worker.Worker, tokens int) { notes.Dispatch(w, tokens) }

// NoteAwaiting counts a request of tokens tokens (-1: unknown) waiting for w's first token
// (Hold.AwaitFirstToken); exactly one NoteFirstToken with the same tokens ends the wait.
func NoteAwaiting(w *worker.Worker, tokens int) { notes.Awaiting(w, tokens) }

// NoteFirstToken ends the wait NoteAwaiting(w, tokens) began (Hold.FirstToken).
func NoteFirstToken(w *worker.Worker, tokens int) { notes.FirstToken(w, tokens) }

// NoteSent starts a request's wait for w's first byte at now, in clock.Nanos (Hold.Begin);
// exactly one NoteFirstByte or NoteNoFirstByte ends it.
func NoteSent(w *worker.Worker, now int64) { notes.Sent(w, now) }

// NoteFirstByte ends the wait of a request sent at sent with the answer's first byte at now
// (Hold.FirstByte), which also clears w's stall state.
func NoteFirstByte(w *worker.Worker, sent, now int64) { notes.FirstByte(w, sent, now) }

// NoteNoFirstByte ends a request's wait for the first byte without one (Hold.End).
func NoteNoFirstByte(w *worker.Worker) { notes.NoFirstByte(w) }

// NoteDecode records one answer whose decode step on w was stepNanos (DecodeTimer.Finish).
func NoteDecode(w *worker.Worker, stepNanos int64) { notes.Decode(w, stepNanos) }
