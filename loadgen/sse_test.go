package loadgen

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// referenceSSE is the event-stream grammar written the obvious way over the whole input:
// normalise line ends, split, interpret. The streaming reader must agree with it.
func referenceSSE(input []byte) []string {
	s := strings.ReplaceAll(string(input), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	lines = lines[:len(lines)-1] // the text after the last line end is not a complete line
	var events []string
	var data strings.Builder
	for _, line := range lines {
		switch {
		case line == "":
			if data.Len() > 0 {
				events = append(events, strings.TrimSuffix(data.String(), "\n"))
			}
			data.Reset()
		case strings.HasPrefix(line, ":"):
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			if name == "data" {
				data.WriteString(value + "\n")
			}
		}
	}
	return events
}

// chunkReader returns the input in pieces whose sizes cycle through sizes.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)])%64 + 1
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func readAllEvents(t testing.TB, r io.Reader) ([]string, error) {
	var s sseReader
	s.reset(r)
	var events []string
	for {
		data, err := s.next()
		if err != nil {
			return events, err
		}
		events = append(events, string(data))
	}
}

func TestSSEReaderGrammar(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"openai stream", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []string{`{"a":1}`, "[DONE]"}},
		{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []string{"x", "y"}},
		{"bare cr", "data: x\r\rdata: y\r\r", []string{"x", "y"}},
		{"multi-line data joined by LF", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comment and other fields ignored", ": keep-alive\nevent: message\nid: 7\nretry: 10\ndata: z\n\n", []string{"z"}},
		{"no space after colon", "data:x\n\n", []string{"x"}},
		{"only first space stripped", "data:  x\n\n", []string{" x"}},
		{"empty data dispatches empty event", "data\n\ndata:\n\n", []string{"", ""}},
		{"blank lines without data dispatch nothing", "\n\n\nevent: e\n\n", nil},
		{"unterminated last event discarded", "data: a\n\ndata: b\n", []string{"a"}},
		{"unterminated last line discarded", "data: a\n\ndata: b", []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(c.in), iotest.OneByteReader(strings.NewReader(c.in)), iotest.HalfReader(strings.NewReader(c.in))} {
				got, err := readAllEvents(t, r)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("error %v, want io.EOF", err)
				}
				if !slices.Equal(got, c.want) {
					t.Fatalf("events %q, want %q", got, c.want)
				}
			}
			if ref := referenceSSE([]byte(c.in)); !slices.Equal(ref, c.want) {
				t.Fatalf("reference disagrees with the table: %q", ref)
			}
		})
	}
}

func TestSSEReaderReportsReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	got, err := readAllEvents(t, r)
	if !errors.Is(err, boom) || !slices.Equal(got, []string{"a"}) {
		t.Fatalf("events %q err %v, want [a] and boom", got, err)
	}
}

func TestSSEReaderGrowsForLongLinesAndReusesBuffers(t *testing.T) {
	long := strings.Repeat("x", 3*sseInitialBuffer+17)
	got, err := readAllEvents(t, strings.NewReader("data: "+long+"\n\ndata: y\n\n"))
	if !errors.Is(err, io.EOF) || len(got) != 2 || got[0] != long || got[1] != "y" {
		t.Fatalf("long event not read back: %d events, err %v", len(got), err)
	}
}

func TestSSEReaderStopsWithoutProgress(t *testing.T) {
	var s sseReader
	s.reset(zeroReader{})
	if _, err := s.next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"), []byte{3, 1, 7})
	f.Add([]byte("data: a\r\ndata: b\r\n\r\n: c\r\rdata\n\n"), []byte{0})
	f.Add([]byte("\r\n\r\n\n\r"), []byte{})
	f.Add([]byte("data:x\rdata: y\n\r\n"), []byte{1, 2})
	f.Fuzz(func(t *testing.T, input, sizes []byte) {
		got, err := readAllEvents(t, &chunkReader{data: bytes.Clone(input), sizes: sizes})
		if !errors.Is(err, io.EOF) {
			t.Fatalf("error %v, want io.EOF", err)
		}
		if want := referenceSSE(input); !slices.Equal(got, want) {
			t.Fatalf("events %q, reference %q", got, want)
		}
	})
}
