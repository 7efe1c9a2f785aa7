package loadgen

import (
	"bytes"
	"errors"
	"io"
)

// errSSELineTooLong is returned when one SSE line exceeds maxSSELine: a runaway or
// hostile server must not make the load generator allocate without bound.
var errSSELineTooLong = errors.New("loadgen: SSE line longer than 16 MiB")

const (
	sseInitialBuffer = 4 << 10
	maxSSELine       = 16 << 20
)

// sseReader splits a text/event-stream into events, following the WHATWG event-stream
// grammar: lines end in CRLF, LF or CR; "data" fields of one event are joined with LF; lines
// starting with ':' are comments; other fields (event, id, retry) are ignored; an event is
// dispatched at a blank line; an unterminated event at end of stream is discarded.
//
// It owns its buffers and reuses them across streams (reset), so steady-state reading does
// not allocate. The slice next returns is valid until the following call.
type sseReader struct {
	r          io.Reader
	buf        []byte
	start, end int // unread bytes are buf[start:end]
	skipLF     bool
	err        error // sticky read error, returned once buffered lines are consumed
	data       []byte
}

// reset starts reading a new stream from r, keeping the buffers.
func (s *sseReader) reset(r io.Reader) {
	if s.buf == nil {
		s.buf = make([]byte, sseInitialBuffer)
	}
	s.r, s.start, s.end, s.skipLF, s.err = r, 0, 0, false, nil
	s.data = s.data[:0]
}

// next returns the data of the next event, io.EOF at a clean end of stream, or the read
// error.
func (s *sseReader) next() ([]byte, error) {
	s.data = s.data[:0]
	for {
		line, err := s.readLine()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if len(s.data) == 0 {
				continue // no data field since the last dispatch
			}
			return s.data[:len(s.data)-1], nil // drop the LF after the last data line
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, line[len(line):]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(name) == "data" {
			s.data = append(s.data, value...)
			s.data = append(s.data, '\n')
		}
	}
}

// readLine returns the next line without its terminator, as a view into buf.
func (s *sseReader) readLine() ([]byte, error) {
	for {
		if s.skipLF && s.start < s.end {
			s.skipLF = false
			if s.buf[s.start] == '\n' {
				s.start++
			}
		}
		if i := indexLineEnd(s.buf[s.start:s.end]); i >= 0 {
			line := s.buf[s.start : s.start+i]
			s.skipLF = s.buf[s.start+i] == '\r'
			s.start += i + 1
			return line, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		s.fill()
	}
}

// indexLineEnd returns the index of the first CR or LF in b, or -1.
func indexLineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	search := b
	if lf >= 0 {
		search = b[:lf]
	}
	if cr := bytes.IndexByte(search, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// fill reads more bytes, compacting or growing the buffer first.
func (s *sseReader) fill() {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= maxSSELine {
			s.err = errSSELineTooLong
			return
		}
		grown := make([]byte, min(2*len(s.buf), maxSSELine))
		copy(grown, s.buf[:s.end])
		s.buf = grown
	}
	for range maxEmptyReads {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.err = err
		}
		if n > 0 || err != nil {
			return
		}
	}
	s.err = io.ErrNoProgress
}

// maxEmptyReads is how many (0, nil) reads in a row fill tolerates, as bufio does.
const maxEmptyReads = 100
