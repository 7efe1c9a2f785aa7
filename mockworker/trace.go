package mockworker

import (
	"encoding/json"
	"sync"
)

// headerTraceparent is the W3C trace context header a gateway sends its workers.
const headerTraceparent = "traceparent"

// lastTrace keeps the traceparent of the last generation request that carried one, so a
// test can check what a gateway sent (GET /admin/trace). Fixed storage: noting it does not
// allocate.
type lastTrace struct {
	mu  sync.Mutex
	buf [128]byte
	n   int
}

// note keeps v (cut to 128 bytes) when it is not empty.
func (t *lastTrace) note(v []byte) {
	if len(v) == 0 {
		return
	}
	t.mu.Lock()
	t.n = copy(t.buf[:], v)
	t.mu.Unlock()
}

// appendJSON appends {"last_traceparent":"..."} ("" before any).
func (t *lastTrace) appendJSON(dst []byte) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, _ := json.Marshal(map[string]string{"last_traceparent": string(t.buf[:t.n])})
	return append(dst, v...)
}

// handleTrace answers GET /admin/trace.
func (w *Worker) handleTrace(ex *exchange, dst []byte) reply {
	if !isGet(ex.method) {
		return methodNotAllowed(dst)
	}
	return reply{status: 200, contentType: contentJSON, body: w.trace.appendJSON(dst)}
}
