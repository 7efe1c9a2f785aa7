package enginemetrics

import "github.com/smg-go/smg/internal/promlabel"

// Samples is the number of samples kept.
func (m *Merger) Samples() int { return m.samples }

// AppendRelabeled is appendRelabeled of the worker url, quoted.
func AppendRelabeled(dst, line []byte, url string) ([]byte, bool) {
	return appendRelabeled(dst, line, promlabel.Quote(url))
}
