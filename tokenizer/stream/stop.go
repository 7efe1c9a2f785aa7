package stream

import "bytes"

// Options are the per-request stop and decoding settings, named after the
// OpenAI/SGLang request fields. The zero value decodes with special tokens
// skipped and never stops.
type Options struct {
	// Stop strings end the text at their first occurrence; empty strings
	// are ignored.
	Stop []string
	// StopTokenIDs end the text when generated, whatever IgnoreEOS says.
	StopTokenIDs []uint32
	// EOSTokenIDs end the text when generated unless IgnoreEOS is set.
	EOSTokenIDs []uint32
	IgnoreEOS   bool
	// NoStopTrim keeps the matched stop string, or the stop token's text, in
	// the output.
	NoStopTrim bool
	// KeepSpecialTokens is the negation of skip_special_tokens, so that the
	// zero value has the OpenAI/SGLang default (skip).
	KeepSpecialTokens bool
}

// Finish says why a StopDecoder finished.
type Finish uint8

const (
	// Continue: not finished.
	Continue Finish = iota
	// StopString: a stop string matched; Result.StopString is the one.
	StopString
	// StopToken: a stop token id or an EOS id was generated; Result.StopToken
	// is the id.
	StopToken
)

// Result is the state after a StopDecoder step. Both Finish values other
// than Continue map to the OpenAI finish_reason "stop".
type Result struct {
	Finish     Finish
	StopString string // when Finish == StopString: the element of Options.Stop that matched
	StopToken  uint32 // when Finish == StopToken
}

// Done reports whether the decoder finished.
func (r Result) Done() bool { return r.Finish != Continue }

// StopDecoder is a DecodeStream with OpenAI stop semantics: stop strings,
// stop token ids, EOS and skip_special_tokens. Text that could be the start
// of a stop string is held back until it cannot be (or Flush), so a stop
// string never reaches the client when trimmed.
//
// The zero value is not usable; call NewStopDecoder or Reset.
// A StopDecoder is not safe for concurrent use.
type StopDecoder struct {
	ds         DecodeStream
	stops      []string // non-empty Options.Stop
	stopb      [][]byte // stops as bytes, in stopBuf, so matching never converts
	stopBuf    []byte
	stopIDs    []uint32
	eosIDs     []uint32
	noStopTrim bool
	maxStop    int    // length of the longest stop string
	held       []byte // text not emitted yet: a possible start of a stop string
	scratch    []byte // text the DecodeStream produced this step
	res        Result
}

// NewStopDecoder returns a decoder for one choice. opts is copied.
func NewStopDecoder(dec Decoder, opts *Options) *StopDecoder {
	d := &StopDecoder{}
	d.Reset(dec, opts)
	return d
}

// Reset makes d ready for a new choice, reusing its buffers; opts is copied
// (the stop strings themselves are shared, not copied). A nil opts is the
// zero Options.
func (d *StopDecoder) Reset(dec Decoder, opts *Options) {
	if opts == nil {
		opts = &Options{}
	}
	d.ds.Reset(dec, !opts.KeepSpecialTokens)
	d.stops = d.stops[:0]
	d.stopBuf = d.stopBuf[:0]
	d.maxStop = 0
	for _, s := range opts.Stop {
		if s != "" {
			d.stops = append(d.stops, s)
			d.stopBuf = append(d.stopBuf, s...)
			d.maxStop = max(d.maxStop, len(s))
		}
	}
	d.stopb = d.stopb[:0]
	off := 0
	for _, s := range d.stops {
		d.stopb = append(d.stopb, d.stopBuf[off:off+len(s):off+len(s)])
		off += len(s)
	}
	d.stopIDs = append(d.stopIDs[:0], opts.StopTokenIDs...)
	d.eosIDs = d.eosIDs[:0]
	if !opts.IgnoreEOS {
		d.eosIDs = append(d.eosIDs, opts.EOSTokenIDs...)
	}
	d.noStopTrim = opts.NoStopTrim
	d.held = d.held[:0]
	d.scratch = d.scratch[:0]
	d.res = Result{}
}

// Result returns the current state.
func (d *StopDecoder) Result() Result { return d.res }

// Step adds one generated id, appends the text that may be sent now to dst
// and returns the extended slice with the state. Once finished, Step
// appends nothing and returns the same Result.
func (d *StopDecoder) Step(dst []byte, id uint32) ([]byte, Result) {
	if d.res.Done() {
		return dst, d.res
	}
	if contains(d.stopIDs, id) || contains(d.eosIDs, id) {
		// The text before the stop token is final: flush the stream (an
		// incomplete UTF-8 tail ends as one Decode would end it) and release
		// held text, unless a stop string completes first.
		d.scratch = d.scratch[:0]
		if d.noStopTrim {
			d.scratch = d.ds.Step(d.scratch, id)
		}
		d.scratch = d.ds.Flush(d.scratch)
		dst = d.feed(dst, d.scratch, true)
		if !d.res.Done() {
			d.res = Result{Finish: StopToken, StopToken: id}
		}
		return dst, d.res
	}
	d.scratch = d.ds.Step(d.scratch[:0], id)
	return d.feed(dst, d.scratch, false), d.res
}

// Steps is Step over ids in order, stopping at the id that finishes; the
// ids after it are ignored.
func (d *StopDecoder) Steps(dst []byte, ids []uint32) ([]byte, Result) {
	for _, id := range ids {
		if dst, _ = d.Step(dst, id); d.res.Done() {
			break
		}
	}
	return dst, d.res
}

// Flush ends the stream when it stops for another reason (length, abort):
// it appends the text still pending in the DecodeStream and the held-back
// text. A stop string completed by that text still finishes with
// StopString. After a stop Flush appends nothing.
func (d *StopDecoder) Flush(dst []byte) ([]byte, Result) {
	if d.res.Done() {
		return dst, d.res
	}
	d.scratch = d.ds.Flush(d.scratch[:0])
	return d.feed(dst, d.scratch, true), d.res
}

// feed runs new text through the stop-string matcher, appending to dst what
// is safe to send. final releases everything that did not match.
func (d *StopDecoder) feed(dst, text []byte, final bool) []byte {
	if len(d.stops) == 0 {
		return append(dst, text...)
	}
	if len(text) == 0 && !final {
		return dst
	}
	d.held = append(d.held, text...)
	// Earliest-ending match first (that is the step a token-by-token check
	// would have hit first), then the earliest start on a tie.
	best, start, end := -1, 0, 0
	for i, s := range d.stopb {
		j := bytes.Index(d.held, s)
		if j < 0 {
			continue
		}
		if e := j + len(s); best < 0 || e < end || (e == end && j < start) {
			best, start, end = i, j, e
		}
	}
	if best >= 0 {
		if d.noStopTrim {
			dst = append(dst, d.held[:end]...)
		} else {
			dst = append(dst, d.held[:start]...)
		}
		d.held = d.held[:0]
		d.res = Result{Finish: StopString, StopString: d.stops[best]}
		return dst
	}
	keep := 0
	if !final {
		keep = d.partial()
	}
	n := len(d.held) - keep
	dst = append(dst, d.held[:n]...)
	d.held = d.held[:copy(d.held, d.held[n:])]
	return dst
}

// partial returns the length of the longest suffix of held that is a proper
// prefix of a stop string: the bytes that must wait for more text.
func (d *StopDecoder) partial() int {
	best := 0
	n := len(d.held)
	for _, s := range d.stopb {
		for k := min(n, len(s)-1); k > best; k-- {
			if d.held[n-k] == s[0] && bytes.Equal(d.held[n-k:], s[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

func contains(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
