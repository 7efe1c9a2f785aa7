package loadgen

import (
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/valyala/fasthttp"
)

// readStream consumes an SSE answer event by event, timing each content event.
func (cl *client) readStream(st *clientState, start time.Time, wantAnswer bool, s sample) sample {
	body := st.resp.BodyStream()
	if body == nil {
		s.fail, s.detail = failTruncated, []byte("response has no body")
		return s
	}
	defer st.resp.CloseBodyStream() //nolint:errcheck // closing only releases the connection
	if s.status != fasthttp.StatusOK || !bytes.HasPrefix(st.resp.Header.ContentType(), []byte("text/event-stream")) {
		// An error, or a server that answered a stream request whole: read it whole.
		var err error
		if st.body, err = readAll(st.body[:0], body, maxWholeBody); err != nil {
			s.fail, s.detail = classify(err), []byte(err.Error())
			return s
		}
		return cl.parseWhole(st, st.body, wantAnswer, s)
	}
	return cl.consumeSSE(st, body, start, wantAnswer, s)
}

// consumeSSE reads an event stream from body, timing each content event, up to and past
// "data: [DONE]". s.finished is the arrival of [DONE]: the request's end, whatever
// draining the rest of the body costs.
func (cl *client) consumeSSE(st *clientState, body io.Reader, start time.Time, wantAnswer bool, s sample) sample {
	st.sse.reset(body)
	var last time.Time
	generated := 0 // /generate streams cumulative text: the bytes already seen
	for {
		data, err := st.sse.next()
		if err != nil {
			s.fail, s.detail = failTruncated, []byte("stream ended before data: [DONE]")
			if !errors.Is(err, io.EOF) {
				s.fail, s.detail = classify(err), []byte(err.Error())
			}
			return s
		}
		if string(data) == "[DONE]" {
			s.finished = time.Now()
			break
		}
		p, err := parsePayload(&st.parser, cl.endpoint, data)
		if err != nil {
			s.fail, s.detail = failBadResponse, data
			return s
		}
		if p.failed {
			s.fail, s.detail = failStreamError, data
			return s
		}
		if p.usage.reported {
			s.usage = p.usage
		}
		content := p.text
		if cl.endpoint == EndpointGenerate {
			if len(p.text) <= generated {
				content = nil
			} else {
				content = p.text[generated:]
				generated = len(p.text)
			}
		}
		if len(content) == 0 {
			continue
		}
		now := time.Now()
		if s.contentEvents == 0 {
			s.ttft = now.Sub(start)
		} else {
			st.itl = append(st.itl, ms(now.Sub(last)))
		}
		last = now
		s.contentEvents++
		if wantAnswer {
			if cl.endpoint == EndpointGenerate {
				st.answer = append(st.answer[:0], p.text...)
			} else {
				st.answer = append(st.answer, content...)
			}
		}
	}
	// Read past [DONE] to the end of the body so the connection returns to the pool.
	drain(&st.sse)
	return s
}

// maxWholeBody bounds a body read whole from a stream request.
const maxWholeBody = 64 << 20

// errBodyTooLarge is returned by readAll past maxWholeBody.
var errBodyTooLarge = errors.New("response body larger than 64 MiB")

// readAll appends r's bytes to dst, up to limit.
func readAll(dst []byte, r io.Reader, limit int) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, errBodyTooLarge
		}
		if errors.Is(err, io.EOF) {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// drain reads a stream to its end, ignoring what it says.
func drain(r *sseReader) {
	for {
		if _, err := r.next(); err != nil {
			return
		}
	}
}

// readBody parses a whole (non-streamed) answer.
func (cl *client) readBody(st *clientState, wantAnswer bool, s sample) sample {
	return cl.parseWhole(st, st.resp.Body(), wantAnswer, s)
}

// parseWhole parses a response body that is one JSON document.
func (cl *client) parseWhole(st *clientState, body []byte, wantAnswer bool, s sample) sample {
	if s.status != fasthttp.StatusOK {
		s.fail, s.detail = failHTTPStatus, body
		return s
	}
	p, err := parsePayload(&st.parser, cl.endpoint, body)
	switch {
	case err != nil:
		s.fail, s.detail = failBadResponse, body
	case p.failed:
		s.fail, s.detail = failStreamError, body
	default:
		s.usage = p.usage
		if wantAnswer {
			st.answer = append(st.answer, p.text...)
		}
	}
	return s
}
