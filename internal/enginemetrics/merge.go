package enginemetrics

import (
	"bytes"
	"io"
	"sort"
	"strings"

	"github.com/smg-go/smg/internal/promlabel"
)

// DefaultMaxSeries bounds the samples one Merger keeps.
const DefaultMaxSeries = 50_000

// Merger collects the expositions of several workers into one.
type Merger struct {
	// MaxSeries bounds the samples kept (the callers' Configs default it to DefaultMaxSeries
	// and refuse less than 1); a Merger with no bound set keeps none and counts them Dropped.
	MaxSeries int

	families map[string]*family
	samples  int
	// Dropped counts samples beyond MaxSeries; Invalid counts lines that were not samples.
	Dropped, Invalid int
	line             []byte
}

type family struct {
	help, typ string
	samples   []byte // relabeled sample lines, each ending in '\n'
}

// Add parses body, the exposition of the worker at url, and keeps its samples with the label
// worker="<url>" added. It returns how many samples it kept.
func (m *Merger) Add(url string, body []byte) int {
	if m.families == nil {
		m.families = map[string]*family{}
	}
	limit := m.MaxSeries
	kept := 0
	quoted := promlabel.Quote(url)
	current := "" // the family the last HELP or TYPE line named
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte{'\n'})
		line = bytes.TrimRight(line, "\r \t")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if line[0] == '#' {
			if name, kind, text, ok := parseComment(line); ok {
				current = name
				f := m.family(name)
				if kind == "HELP" && f.help == "" {
					f.help = text
				} else if kind == "TYPE" && f.typ == "" {
					f.typ = text
				}
			}
			continue
		}
		var ok bool
		m.line, ok = appendRelabeled(m.line[:0], line, quoted)
		if !ok {
			m.Invalid++
			continue
		}
		if m.samples >= limit {
			m.Dropped++
			continue
		}
		name := sampleName(line)
		key := name
		if current != "" && strings.HasPrefix(name, current) {
			key = current // name_bucket, name_sum, name_count of the family named above
		}
		f := m.family(key)
		f.samples = append(append(f.samples, m.line...), '\n')
		m.samples++
		kept++
	}
	return kept
}

func (m *Merger) family(name string) *family {
	f := m.families[name]
	if f == nil {
		f = &family{}
		m.families[name] = f
	}
	return f
}

// WriteTo writes the merged exposition: families in name order, each with its HELP and TYPE
// line (the first seen) and every worker's samples.
func (m *Merger) WriteTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(m.families))
	for n, f := range m.families {
		if len(f.samples) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		f := m.families[n]
		if f.help != "" {
			buf.WriteString("# HELP " + n + " " + f.help + "\n")
		}
		if f.typ != "" {
			buf.WriteString("# TYPE " + n + " " + f.typ + "\n")
		}
		buf.Write(f.samples)
	}
	return buf.WriteTo(w)
}

// parseComment reads "# HELP name text" or "# TYPE name type".
func parseComment(line []byte) (name, kind, text string, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte("# "))
	if !found {
		return "", "", "", false
	}
	k, rest, found := bytes.Cut(rest, []byte(" "))
	if !found || (string(k) != "HELP" && string(k) != "TYPE") {
		return "", "", "", false
	}
	n, t, _ := bytes.Cut(rest, []byte(" "))
	if !validName(n) {
		return "", "", "", false
	}
	return string(n), string(k), string(t), true
}

func sampleName(line []byte) string {
	end := bytes.IndexAny(line, "{ \t")
	if end < 0 {
		end = len(line)
	}
	return string(line[:end])
}
