package extract

import (
	"errors"
	"testing"

	"github.com/valyala/fastjson"
)

// The benchmarks measure Extract against the same extraction written with valyala/fastjson
// and a pooled parser, the alternative docs/architecture.md asks to measure, and against the
// encoding/json reference for scale. Results and the decision: docs/benchmarks-extract.md.

func BenchmarkExtract(b *testing.B) {
	for _, c := range realistic(b) {
		b.Run(c.name, func(b *testing.B) {
			var f Fields
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Extract(c.body, c.route, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFastjson(b *testing.B) {
	for _, c := range realistic(b) {
		b.Run(c.name, func(b *testing.B) {
			var f fastjsonFields
			// The same results as Extract, or the comparison would be meaningless.
			if err := extractFastjson(c.body, c.route, &f); err != nil {
				b.Fatal(err)
			}
			var ref Fields
			if err := Extract(c.body, c.route, &ref); err != nil {
				b.Fatal(err)
			}
			if g := got(&f.Fields); !g.equal(got(&ref)) {
				b.Fatalf("fastjson extraction differs:\n got %+v\nwant %+v", g, got(&ref))
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := extractFastjson(c.body, c.route, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodingJSON(b *testing.B) {
	for _, c := range realistic(b) {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reference(c.body, c.route); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fastjsonFields is Fields plus the copy fastjson needs: Parser.ParseBytes copies the body
// into the parser, whose buffers go back to the pool after each call, so every extracted
// string is copied out into buffers of our own.
type fastjsonFields struct {
	Fields
	buf []byte
}

var fastjsonParsers fastjson.ParserPool

var errFastjson = errors.New("fastjson: wrong type")

// extractFastjson applies the package's extraction rules with fastjson, the way the
// gateway would have written it. It checks the same field types but inherits fastjson's
// leniency elsewhere (no check of control characters or UTF-8 in strings; the first of
// duplicate names wins).
func extractFastjson(body []byte, route Route, f *fastjsonFields) error {
	p := fastjsonParsers.Get()
	defer fastjsonParsers.Put(p)
	f.Reset()
	f.buf = f.buf[:0]
	v, err := p.ParseBytes(body)
	if err != nil {
		return err
	}
	if v.Type() != fastjson.TypeObject {
		return errFastjson
	}
	// Strings are copied into f.buf and sliced out of it at the end, since appending may move it.
	type span struct{ start, end int }
	var model, rid, text span
	keep := func(s []byte) span {
		start := len(f.buf)
		f.buf = append(f.buf, s...)
		return span{start, len(f.buf)}
	}
	if m := v.Get("model"); m != nil {
		switch m.Type() {
		case fastjson.TypeString:
			model, f.HasModel = keep(m.GetStringBytes()), true
		case fastjson.TypeNull:
		default:
			return errFastjson
		}
	}
	if s := v.Get("stream"); s != nil {
		switch s.Type() {
		case fastjson.TypeTrue:
			f.Stream = true
		case fastjson.TypeFalse, fastjson.TypeNull:
		default:
			return errFastjson
		}
	}
	firstString := func(x *fastjson.Value) (span, error) {
		if x == nil {
			return span{}, nil
		}
		switch x.Type() {
		case fastjson.TypeString:
			return keep(x.GetStringBytes()), nil
		case fastjson.TypeNull:
			return span{}, nil
		case fastjson.TypeArray:
			arr := x.GetArray()
			for _, e := range arr {
				if e.Type() != fastjson.TypeString {
					return span{}, errFastjson
				}
			}
			if len(arr) > 0 {
				return keep(arr[0].GetStringBytes()), nil
			}
			return span{}, nil
		}
		return span{}, errFastjson
	}
	if rid, err = firstString(v.Get("rid")); err != nil {
		return err
	}
	switch route {
	case RouteChat:
		text.start = len(f.buf)
		piece := func(s []byte) {
			if len(s) == 0 {
				return
			}
			if len(f.buf) > text.start {
				f.buf = append(f.buf, ' ')
			}
			f.buf = append(f.buf, s...)
		}
		if msgs := v.Get("messages"); msgs != nil && msgs.Type() != fastjson.TypeNull {
			arr, err := msgs.Array()
			if err != nil {
				return err
			}
			for _, m := range arr {
				if m.Type() != fastjson.TypeObject {
					return errFastjson
				}
				switch c := m.Get("content"); {
				case c == nil || c.Type() == fastjson.TypeNull:
				case c.Type() == fastjson.TypeString:
					piece(c.GetStringBytes())
				case c.Type() == fastjson.TypeArray:
					for _, part := range c.GetArray() {
						if part.Type() != fastjson.TypeObject {
							return errFastjson
						}
						if string(part.GetStringBytes("type")) != "text" {
							continue
						}
						t := part.Get("text")
						if t == nil || t.Type() != fastjson.TypeString {
							return errFastjson
						}
						piece(t.GetStringBytes())
					}
				default:
					return errFastjson
				}
				if string(m.GetStringBytes("role")) == "assistant" {
					piece(m.GetStringBytes("reasoning_content"))
				}
			}
		}
		text.end = len(f.buf)
	case RouteCompletions, RouteGenerate:
		key := "prompt"
		if route == RouteGenerate {
			key = "text"
		}
		if text, err = firstString(v.Get(key)); err != nil {
			return err
		}
		ids := v.Get("input_ids")
		if route == RouteCompletions {
			ids = nil // token prompts are not in the benchmark bodies
		}
		if ids != nil && ids.Type() != fastjson.TypeNull {
			arr, err := ids.Array()
			if err != nil {
				return err
			}
			if len(arr) > 0 && arr[0].Type() == fastjson.TypeArray {
				arr = arr[0].GetArray()
			}
			for _, e := range arr {
				id, err := e.Uint()
				if err != nil || id > 1<<32-1 {
					return errFastjson
				}
				f.InputIDs = append(f.InputIDs, uint32(id))
			}
		}
	}
	f.Model, f.Rid, f.Text = f.buf[model.start:model.end], f.buf[rid.start:rid.end], f.buf[text.start:text.end]
	if !f.HasModel {
		f.Model = nil
	}
	return nil
}
