package evloop

import "errors"

// The failures of an answer read whole (Forwarder.UpstreamHead false, and every Call).
var (
	// ErrAnswerTooLarge: the worker declared (Content-Length) or sent more than
	// Config.MaxHeldBody. A declared length past it is refused at the head, before a byte of
	// the body is read.
	ErrAnswerTooLarge = errors.New("the worker's answer is larger than the gateway reads whole")
	// ErrAnswerMemory: the answers held at once have taken the budget of
	// Config.HeldReserve; the worker is not at fault.
	ErrAnswerMemory = errors.New("the gateway holds too many answers in memory at once")
)

// heldKeep is the largest held-answer buffer kept for the next answer once one ends: a
// larger one is dropped, so that its memory returns when its request ends, not when the
// connection closes.
const heldKeep = 64 << 10

// heldBuf is an answer's body read whole. Its buffer grows as bytes arrive, never from the
// declared length, and every growth is reserved from Config.HeldReserve first: all held
// answers of the server (and their copies waiting in clients' output) stay within the
// caller's budget.
type heldBuf struct {
	b        []byte
	reserved int // bytes taken from Config.HeldReserve
}

// refuseDeclared reports whether a head's declared length is past MaxHeldBody: the answer is
// refused before its body is read.
func refuseDeclared(l *loop, d *bodyDecoder) bool {
	return d.mode == bodyLength && d.remaining > l.s.cfg.MaxHeldBody
}

// decode decodes data into the buffer, which grows (reserved first) only when full, so the
// decoder never appends past what was reserved.
func (h *heldBuf) decode(l *loop, d *bodyDecoder, data []byte) (used int, done bool, err error) {
	for {
		if len(h.b) == cap(h.b) && used < len(data) {
			if err := h.grow(l); err != nil {
				return used, false, err
			}
		}
		n := min(len(data)-used, cap(h.b)-len(h.b))
		var u int
		h.b, u, done, err = d.decode(data[used:used+n], h.b)
		used += u
		if err == nil && len(h.b) > l.s.cfg.MaxHeldBody {
			err = ErrAnswerTooLarge // a buffer kept from an earlier answer may be larger
		}
		if err != nil || done || used == len(data) || u < n {
			return used, done, err
		}
	}
}

// grow doubles the buffer, up to MaxHeldBody.
func (h *heldBuf) grow(l *loop) error {
	cfg := &l.s.cfg
	if cap(h.b) >= cfg.MaxHeldBody {
		return ErrAnswerTooLarge
	}
	size := min(max(2*cap(h.b), 16<<10), cfg.MaxHeldBody)
	if f := cfg.HeldReserve; f != nil {
		if delta := size - h.reserved; delta > 0 {
			if !f(delta) {
				return ErrAnswerMemory
			}
			h.reserved += delta
		}
	}
	h.b = grow(h.b, size)
	return nil
}

// handOff gives the buffer's reservation to what now holds its copy (a client's output) and
// drops a large buffer.
func (h *heldBuf) handOff() int {
	n := h.reserved
	h.reserved = 0
	h.trim()
	return n
}

// free returns the buffer's reservation and drops a large buffer: the answer has ended.
func (h *heldBuf) free(l *loop) {
	if h.reserved > 0 {
		if f := l.s.cfg.HeldRelease; f != nil {
			f(h.reserved)
		}
		h.reserved = 0
	}
	h.trim()
}

func (h *heldBuf) trim() {
	if cap(h.b) > heldKeep {
		h.b = nil
	} else {
		h.b = h.b[:0]
	}
}
