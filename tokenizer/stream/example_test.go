package stream_test

import (
	"fmt"
	"sync"

	"github.com/smg-go/smg/tokenizer/stream"
)

// bytesDecoder is a stand-in tokenizer: id i is the i-th string.
type bytesDecoder []string

func (v bytesDecoder) Decode(dst []byte, ids []uint32, skipSpecial bool) []byte {
	for _, id := range ids {
		dst = append(dst, v[id]...)
	}
	return dst
}

var decoders = sync.Pool{New: func() any { return new(stream.StopDecoder) }}

// One StopDecoder per choice, taken from a pool and Reset with the
// request's options; each step's text goes out as one SSE delta.
func Example() {
	vocab := bytesDecoder{"Hello", ",", " wor", "ld", "\n\n", "User", ":", "\xe4\xbd", "\xa0"}
	opts := &stream.Options{Stop: []string{"\n\nUser:"}}

	d := decoders.Get().(*stream.StopDecoder)
	defer decoders.Put(d)
	d.Reset(vocab, opts)

	var delta []byte
	for _, id := range []uint32{0, 7, 8, 1, 2, 3, 4, 5, 6, 0} {
		var res stream.Result
		delta, res = d.Step(delta[:0], id)
		fmt.Printf("%q\n", delta)
		if res.Done() {
			fmt.Printf("finish_reason=stop matched=%q\n", res.StopString)
			return
		}
	}
	delta, _ = d.Flush(delta[:0])
	fmt.Printf("%q\n", delta)
	// Output:
	// "Hello"
	// ""
	// "你"
	// ","
	// " wor"
	// "ld"
	// ""
	// ""
	// ""
	// finish_reason=stop matched="\n\nUser:"
}
