package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
	"github.com/zeebo/xxh3"
)

// ErrMalformed wraps every decoding error: the batch is dropped whole and counted.
var ErrMalformed = errors.New("malformed KV event batch")

// maxDepth bounds the nesting of values the decoder skips (unknown fields, vLLM's extra_keys),
// so that a hostile batch cannot recurse the stack away.
const maxDepth = 16

// SeqLen is the length of a frame's sequence number (8 bytes, big-endian).
const SeqLen = 8

// ParseFrames splits a published message into its topic, sequence number and msgpack payload:
// [topic, 8-byte big-endian sequence, payload], the frames vLLM's and SGLang's publishers send.
// The returned slices alias frames.
func ParseFrames(frames [][]byte) (topic []byte, seq uint64, payload []byte, err error) {
	if len(frames) != 3 {
		return nil, 0, nil, fmt.Errorf("%w: %d frames, want 3 (topic, sequence, payload)", ErrMalformed, len(frames))
	}
	if len(frames[1]) != SeqLen {
		return nil, 0, nil, fmt.Errorf("%w: sequence frame of %d bytes, want %d", ErrMalformed, len(frames[1]), SeqLen)
	}
	return frames[0], binary.BigEndian.Uint64(frames[1]), frames[2], nil
}

// FoldHash names a block whose engine hash is bytes (vLLM's sha256 digests) with 64 bits. The
// same bytes always fold to the same value, so a removal finds the block its store named.
func FoldHash(b []byte) uint64 { return xxh3.Hash(b) }

// Decoder decodes msgpack event batches in both of the engines' encodings:
//
//   - tagged arrays (msgspec array_like, SGLang and older vLLM): a batch is
//     [ts, [event...], dp_rank?] and an event ["BlockStored", block_hashes, parent_block_hash,
//     token_ids, block_size, lora_id, medium?, lora_name?, extra_keys?, group_idx?, ...],
//     ["BlockRemoved", block_hashes, medium?, group_idx?] or ["AllBlocksCleared"];
//   - tagged maps (newer vLLM): {"ts", "events", "data_parallel_rank"} and events as maps with
//     the same field names and the tag in "type".
//
// Fields it does not know are skipped, in either encoding, so newer engines still decode. A
// Decoder is not safe for concurrent use; it reuses its buffers and the Batch's slices.
type Decoder struct {
	r       bytes.Reader
	d       *msgpack.Decoder
	scratch []byte
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.d = msgpack.NewDecoder(&d.r)
	return d
}

// Decode decodes payload into b, replacing its contents. On error b holds a partial batch
// that must not be applied. Allocation is bounded by len(payload): no length read from the
// payload is trusted beyond the bytes that remain.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	b.reset()
	d.r.Reset(payload)
	d.d.Reset(&d.r)
	if err := d.batch(b); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if d.r.Len() != 0 {
		return fmt.Errorf("%w: %d bytes after the batch", ErrMalformed, d.r.Len())
	}
	return nil
}

func (d *Decoder) peek() (byte, error) { return d.d.PeekCode() }

// arrayLen reads an array header and checks it against the bytes left (every element takes
// at least one byte).
func (d *Decoder) arrayLen() (int, error) {
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n > d.r.Len() {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, d.r.Len())
	}
	return n, nil
}

func (d *Decoder) mapLen() (int, error) {
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return 0, err
	}
	if n > d.r.Len()/2 {
		return 0, fmt.Errorf("map of %d entries in %d bytes", n, d.r.Len())
	}
	return n, nil
}

// str reads a string or bin into the decoder's scratch buffer; valid until the next call.
func (d *Decoder) str() ([]byte, error) {
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	if n > d.r.Len() {
		return nil, fmt.Errorf("string of %d bytes in %d", n, d.r.Len())
	}
	if cap(d.scratch) < n {
		d.scratch = make([]byte, n)
	}
	d.scratch = d.scratch[:n]
	if err := d.d.ReadFull(d.scratch); err != nil {
		return nil, err
	}
	return d.scratch, nil
}

// skip skips one value of any type, recursing at most maxDepth levels into arrays and maps.
func (d *Decoder) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.arrayLen()
		if err != nil {
			return err
		}
		for range n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.mapLen()
		if err != nil {
			return err
		}
		for range 2 * n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	}
	return d.d.Skip() // a scalar, string, bin or ext: no recursion
}

func isNil(c byte) bool { return c == msgpcode.Nil }

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }

// record reads the header of a struct as msgspec encodes one, an array (array_like) or a map,
// and returns its length and whether it is a map; what names the struct in the error when the
// value is neither.
func (d *Decoder) record(what string) (n int, keyed bool, err error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	switch {
	case isArray(c):
		n, err = d.arrayLen()
		return n, false, err
	case isMap(c):
		n, err = d.mapLen()
		return n, true, err
	}
	return 0, false, fmt.Errorf("%s is msgpack code %#x, want an array or a map", what, c)
}

// batchFields are the batch's fields in the positions of its array encoding.
var batchFields = []string{"ts", "events", "data_parallel_rank"}

func (d *Decoder) batch(b *Batch) error {
	n, keyed, err := d.record("batch")
	if err != nil {
		return err
	}
	if !keyed && n < 2 {
		return fmt.Errorf("batch array of %d fields, want at least 2 (ts, events)", n)
	}
	sawEvents := false
	for i := range n {
		name := at(batchFields, i)
		if keyed {
			if name, err = d.key("batch", batchFields); err != nil {
				return err
			}
		}
		sawEvents = sawEvents || name == "events"
		if err := d.batchField(b, name); err != nil {
			return err
		}
	}
	if !sawEvents { // an array has its events at position 1
		return errors.New(`batch map without "events"`)
	}
	return nil
}

// batchField decodes the batch field name; "" skips a field this decoder does not know.
func (d *Decoder) batchField(b *Batch, name string) error {
	switch name {
	case "ts":
		return d.ts(b)
	case "events":
		return d.events(b)
	case "data_parallel_rank":
		return d.dpRank(b)
	}
	return d.skip(1)
}

// at returns the field name at position i of an array encoding with these names, "" past
// them.
func at(names []string, i int) string {
	if i < len(names) {
		return names[i]
	}
	return ""
}

// key reads the key of a map encoding and returns the name of names equal to it without
// allocating, "" for a key not among them; what names the struct in the error.
func (d *Decoder) key(what string, names []string) (string, error) {
	k, err := d.str()
	if err != nil {
		return "", fmt.Errorf("%s key: %w", what, err)
	}
	for _, name := range names {
		if string(k) == name {
			return name, nil
		}
	}
	return "", nil
}

// present reports whether a value follows, skipping a nil one (an optional field left out).
func (d *Decoder) present() (bool, error) {
	c, err := d.peek()
	if err != nil {
		return false, err
	}
	if isNil(c) {
		return false, d.d.Skip()
	}
	return true, nil
}

// count reads a non-negative int32, the field name in the error when it is out of range.
func (d *Decoder) count(name string) (int, error) {
	v, err := d.d.DecodeInt64()
	if err == nil && (v < 0 || v > math.MaxInt32) {
		err = fmt.Errorf("%s %d", name, v)
	}
	return int(v), err
}

func (d *Decoder) ts(b *Batch) error {
	v, err := d.d.DecodeFloat64() // msgspec writes a float; integers decode too
	if err != nil {
		return fmt.Errorf("ts: %w", err)
	}
	b.TS = v
	return nil
}

func (d *Decoder) dpRank(b *Batch) error {
	if ok, err := d.present(); !ok {
		return err
	}
	v, err := d.d.DecodeInt64()
	if err != nil {
		return fmt.Errorf("data_parallel_rank: %w", err)
	}
	if v < 0 || v > math.MaxInt32 {
		return fmt.Errorf("data_parallel_rank %d", v)
	}
	b.DPRank, b.HasDPRank = int(v), true
	return nil
}

func (d *Decoder) events(b *Batch) error {
	n, err := d.arrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range n {
		if err := d.event(b.next()); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

func kindOf(tag []byte) (Kind, error) {
	switch string(tag) {
	case "BlockStored":
		return Stored, nil
	case "BlockRemoved":
		return Removed, nil
	case "AllBlocksCleared":
		return Cleared, nil
	}
	return 0, fmt.Errorf("unknown event type %q", tag)
}

// Field positions of the array encoding after the tag, per kind (msgspec's declaration order).
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
	// eventKeys are the keys of the map encoding: the tag's and every field's.
	eventKeys = append([]string{"type"}, storedFields...)
)

// kind reads the event's tag into e.Kind; what names the tag's field in the error.
func (d *Decoder) kind(e *Event, what string) error {
	tag, err := d.str()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	e.Kind, err = kindOf(tag)
	return err
}

func (d *Decoder) event(e *Event) error {
	n, keyed, err := d.record("event")
	if err != nil {
		return err
	}
	if !keyed {
		if n < 1 {
			return errors.New("empty event array")
		}
		if err := d.kind(e, "tag"); err != nil {
			return err
		}
		var names []string
		switch e.Kind {
		case Stored:
			names = storedFields
			if n < 5 { // the fields without defaults: hashes, parent, tokens, block size
				return fmt.Errorf("BlockStored array of %d fields, want at least 5", n)
			}
		case Removed:
			names = removedFields
			if n < 2 {
				return fmt.Errorf("BlockRemoved array of %d fields, want at least 2", n)
			}
		}
		for i := 1; i < n; i++ {
			if err := d.field(e, at(names, i-1)); err != nil {
				return err
			}
		}
		return nil
	}
	for range n {
		name, err := d.key("event", eventKeys)
		if err != nil {
			return err
		}
		if name == "type" {
			err = d.kind(e, "type")
		} else {
			err = d.field(e, name)
		}
		if err != nil {
			return err
		}
	}
	if e.Kind == 0 {
		return errors.New(`event map without "type"`)
	}
	return nil
}

func (d *Decoder) field(e *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		e.BlockHashes, err = d.hashes(e.BlockHashes[:0])
	case "parent_block_hash":
		var ok bool
		if ok, err = d.present(); ok {
			e.ParentHash, err = d.hash()
			e.HasParent = err == nil
		}
	case "token_ids":
		e.TokenIDs, err = d.tokens(e.TokenIDs[:0])
	case "block_size":
		e.BlockSize, err = d.count("block_size")
	case "lora_id":
		var ok bool
		if ok, err = d.present(); ok {
			e.LoraID, err = d.d.DecodeInt64()
			e.HasLora = true
		}
	case "lora_name":
		var s []byte
		if s, err = d.str(); err == nil && s != nil {
			e.LoraName, e.HasLora = string(s), true
		}
	case "medium":
		var s []byte
		if s, err = d.str(); err == nil && s != nil {
			e.Medium = mediumName(s)
		}
	case "group_idx":
		var ok bool
		if ok, err = d.present(); ok {
			e.GroupIdx, err = d.count("group_idx")
		}
	default:
		err = d.skip(1)
	}
	if err != nil && name != "" {
		return fmt.Errorf("%s: %w", name, err)
	}
	return err
}

// mediumName interns the common mediums so that decoding them allocates nothing.
func mediumName(s []byte) string {
	switch string(s) {
	case "GPU":
		return "GPU"
	case "CPU":
		return "CPU"
	case "":
		return ""
	}
	return string(s)
}

// hash reads one block hash: an integer (signed or not, kept as its 64 bits) or bytes
// (folded by FoldHash).
func (d *Decoder) hash() (uint64, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case c == msgpcode.Uint64:
		return d.d.DecodeUint64()
	case msgpcode.IsFixedNum(c), c >= msgpcode.Uint8 && c <= msgpcode.Int64:
		v, err := d.d.DecodeInt64()
		return uint64(v), err
	case msgpcode.IsString(c), msgpcode.IsBin(c):
		s, err := d.str()
		if err != nil {
			return 0, err
		}
		return FoldHash(s), nil
	}
	return 0, fmt.Errorf("block hash is msgpack code %#x, want an integer or bytes", c)
}

func (d *Decoder) hashes(dst []uint64) ([]uint64, error) {
	n, err := d.arrayLen()
	if err != nil {
		return dst, err
	}
	for range n {
		h, err := d.hash()
		if err != nil {
			return dst, err
		}
		dst = append(dst, h)
	}
	return dst, nil
}

func (d *Decoder) tokens(dst []uint32) ([]uint32, error) {
	n, err := d.arrayLen()
	if err != nil {
		return dst, err
	}
	for range n {
		v, err := d.d.DecodeInt64()
		if err != nil {
			return dst, err
		}
		if v < 0 || v > math.MaxUint32 {
			return dst, fmt.Errorf("token id %d", v)
		}
		dst = append(dst, uint32(v))
	}
	return dst, nil
}
