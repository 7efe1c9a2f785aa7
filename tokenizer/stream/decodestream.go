package stream

import (
	"bytes"
	"unicode/utf8"
)

// Decoder turns token ids into text. Decode appends the text of ids to dst
// and returns the extended slice; it must not retain dst or ids.
// skipSpecial drops special tokens (BOS, EOS, chat markers) from the text.
// Invalid or incomplete UTF-8 may come back either as U+FFFD or as the raw
// bytes; DecodeStream treats both as "not ready yet" at the end of text.
type Decoder interface {
	Decode(dst []byte, ids []uint32, skipSpecial bool) []byte
}

// specialReporter is implemented by tokenizers that can tell special ids
// apart (tokenizer.Tokenizer does).
type specialReporter interface {
	IsSpecial(id uint32) bool
}

// DecodeStream turns a stream of token ids into text chunks, one Step per
// id, with the algorithm of Hugging Face tokenizers' DecodeStream: it keeps
// a window ids[prefix:] and the text of ids[prefix:read]; a step decodes the
// window and emits what follows the prefix text only when the text grew and
// does not end in an incomplete UTF-8 sequence. The prefix tokens give the
// decoder left context, so decoders that depend on it (SentencePiece's
// leading-space rule, byte fallback) produce the same text as one Decode.
//
// The zero value is not usable; call NewDecodeStream or Reset.
// A DecodeStream is not safe for concurrent use.
type DecodeStream struct {
	dec         Decoder
	special     specialReporter // dec, when it reports special ids
	skipSpecial bool
	ids         []uint32 // window; ids[:read] already emitted
	read        int      // ids[read:] have not produced text yet
	prefix      []byte   // Decode(ids[:read]), the text already emitted from the window
	text        []byte   // scratch: Decode(ids)
}

// NewDecodeStream returns a stream decoding with dec.
func NewDecodeStream(dec Decoder, skipSpecial bool) *DecodeStream {
	s := &DecodeStream{}
	s.Reset(dec, skipSpecial)
	return s
}

// Reset makes s ready for a new sequence, keeping its buffers so a pooled
// DecodeStream does not allocate again.
func (s *DecodeStream) Reset(dec Decoder, skipSpecial bool) {
	s.dec = dec
	s.special, _ = dec.(specialReporter)
	s.skipSpecial = skipSpecial
	s.ids = s.ids[:0]
	s.read = 0
	s.prefix = s.prefix[:0]
	s.text = s.text[:0]
}

// Step adds id and appends to dst the text that became final, possibly
// none (the id completes no character yet, or is a skipped special token).
func (s *DecodeStream) Step(dst []byte, id uint32) []byte {
	s.ids = append(s.ids, id)
	s.text = s.dec.Decode(s.text[:0], s.ids, s.skipSpecial)
	if len(s.text) <= len(s.prefix) || !complete(s.text) {
		if s.skipSpecial && s.special != nil && s.special.IsSpecial(id) {
			// Decode drops skipped special ids before decoding (as HF
			// does), so removing one from the window changes no text and
			// keeps a run of them from growing it. Checked only here, off
			// the path of steps that emit.
			s.ids = s.ids[:len(s.ids)-1]
		}
		return dst
	}
	dst = append(dst, s.text[s.split():]...)
	s.slide()
	return dst
}

// slide drops the old prefix ids after an emission: the ids that just
// produced text become the prefix, which bounds the window and the cost of
// each Decode.
func (s *DecodeStream) slide() {
	n := copy(s.ids, s.ids[s.read:])
	s.ids = s.ids[:n]
	s.read = n
	s.prefix = s.dec.Decode(s.prefix[:0], s.ids, s.skipSpecial)
}

// Flush appends the text of ids that have not produced text yet, as one
// Decode of the whole sequence would end (an incomplete UTF-8 tail becomes
// whatever the Decoder makes of it, usually U+FFFD). The stream stays usable.
func (s *DecodeStream) Flush(dst []byte) []byte {
	if s.read == len(s.ids) {
		return dst
	}
	s.text = s.dec.Decode(s.text[:0], s.ids, s.skipSpecial)
	if len(s.text) > len(s.prefix) {
		dst = append(dst, s.text[s.split():]...)
	}
	s.slide()
	return dst
}

// Pending reports whether ids have been stepped that produced no text yet.
func (s *DecodeStream) Pending() bool { return s.read < len(s.ids) }

// complete reports whether b ends in a whole character that is not U+FFFD.
func complete(b []byte) bool {
	r, _ := utf8.DecodeLastRune(b)
	return r != utf8.RuneError
}

// split returns where the new text starts in s.text: after the prefix text.
// Should a decoder's prefix text not be a byte prefix of the longer text
// (HF returns an error there), the split moves back to a character start,
// as SMG's Rust stream does, so at least no character is cut in two.
func (s *DecodeStream) split() int {
	i := len(s.prefix)
	if bytes.HasPrefix(s.text, s.prefix) {
		return i
	}
	for i > 0 && !utf8.RuneStart(s.text[i]) {
		i--
	}
	return i
}
