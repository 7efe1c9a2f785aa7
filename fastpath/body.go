package fastpath

import "sync/atomic"

// Request bodies are read by the event loops into buffers that grow as bytes arrive, never
// sized from the declared Content-Length: a client that declared 500 MB and sent 10 bytes
// used to hold 500 MB until the read timeout. A body costs at most twice what has
// arrived, and all bodies being read or forwarded together share one budget
// (--max-request-body-memory, evloop.Config.Reserve and Release): past it a request gets 503
// at once instead of the gateway running out of memory.

// DefaultMaxBodyMemory is --max-request-body-memory's default: 1 GiB for all request bodies
// held at once, twice the default --max-payload-size.
const DefaultMaxBodyMemory = 1 << 30

// Workers' answers read whole (non-streamed generation answers, PD prefill and EPD encode
// answers) are bounded the same way: each by MaxAnswerSize (a longer declared Content-Length
// is refused at the head, before a byte of it is read), all together by MaxAnswerMemory,
// reserved as their buffers grow and returned when the answer has been sent or its request
// ended (evloop.Config.HeldReserve and HeldRelease). A worker declaring 5 GB used to make the
// gateway read 256 MiB per request with nothing shared bounding them.
const (
	DefaultMaxAnswerSize   = 256 << 20
	DefaultMaxAnswerMemory = 1 << 30
)

// bodyBudget counts the bytes of the body buffers in use against a limit.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reserve takes n bytes of the budget, or nothing if they are not there.
func (b *bodyBudget) reserve(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *bodyBudget) release(n int) { b.used.Add(-int64(n)) }
