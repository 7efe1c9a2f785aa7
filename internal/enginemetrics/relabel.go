package enginemetrics

import (
	"bytes"
	"strconv"
)

// LabelWorker is the label every re-exported sample carries: the worker's URL.
const LabelWorker = "worker"

// appendRelabeled appends the sample line `name{labels} value [timestamp]` to dst with the
// label worker=quotedURL first (promlabel.Quote of the worker's URL); an engine's own worker
// label becomes exported_worker. ok is false, and dst is returned unchanged, when line is not
// a well-formed sample.
func appendRelabeled(dst, line []byte, quotedURL string) ([]byte, bool) {
	start := len(dst)
	if bytes.IndexByte(line, '\n') >= 0 {
		return dst, false
	}
	i := 0
	for i < len(line) && nameByte(line[i], i == 0) {
		i++
	}
	if i == 0 {
		return dst, false
	}
	dst = append(dst, line[:i]...)
	dst = append(dst, "{"+LabelWorker+"="...)
	dst = append(dst, quotedURL...)
	if i < len(line) && line[i] == '{' {
		i++
		for {
			i = skipBlanks(line, i)
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			var ok bool
			if dst, i, ok = appendLabel(dst, line, i); !ok {
				return dst[:start], false
			}
		}
	}
	dst = append(dst, '}')
	rest := bytes.TrimLeft(line[i:], " \t")
	if len(rest) == len(line[i:]) && i < len(line) { // a value must be separated from the name
		return dst[:start], false
	}
	value, ts, _ := bytes.Cut(bytes.TrimRight(rest, " \t\r"), []byte(" "))
	ts = bytes.TrimLeft(ts, " \t")
	if !validValue(value) || (len(ts) > 0 && !validTimestamp(ts)) {
		return dst[:start], false
	}
	dst = append(append(dst, ' '), value...)
	if len(ts) > 0 {
		dst = append(append(dst, ' '), ts...)
	}
	return dst, true
}

// appendLabel appends `,name="value"` for the label pair that starts line[i:] (an engine's
// worker label renamed exported_worker) and returns the index past the pair and the comma
// after it; ok is false when line[i:] does not start with a well-formed pair.
func appendLabel(dst, line []byte, i int) ([]byte, int, bool) {
	n := i
	for i < len(line) && nameByte(line[i], i == n) && line[i] != ':' {
		i++
	}
	if i == n || i >= len(line) || line[i] != '=' || i+1 >= len(line) || line[i+1] != '"' {
		return dst, i, false
	}
	name := line[n:i]
	i += 2
	v := i
	for i < len(line) && line[i] != '"' {
		switch line[i] {
		case '\n':
			return dst, i, false
		case '\\': // the format's only escapes: \\, \" and \n
			if i+1 >= len(line) || (line[i+1] != '\\' && line[i+1] != '"' && line[i+1] != 'n') {
				return dst, i, false
			}
			i++
		}
		i++
	}
	if i >= len(line) {
		return dst, i, false
	}
	dst = append(dst, ',')
	if string(name) == LabelWorker {
		dst = append(dst, "exported_"...)
	}
	dst = append(dst, name...)
	dst = append(dst, `="`...)
	dst = append(dst, line[v:i]...)
	dst = append(dst, '"')
	i = skipBlanks(line, i+1) // past the closing quote
	if i < len(line) && line[i] == ',' {
		i++
	}
	return dst, i, true
}

// skipBlanks returns the index of the first byte at or after i that is not a space or a tab.
func skipBlanks(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return i
}

func nameByte(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for i, c := range b {
		if !nameByte(c, i == 0) {
			return false
		}
	}
	return true
}

func validValue(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	switch string(b) {
	case "NaN", "+Inf", "-Inf":
		return true
	}
	_, err := strconv.ParseFloat(string(b), 64)
	return err == nil
}

func validTimestamp(b []byte) bool {
	_, err := strconv.ParseInt(string(b), 10, 64)
	return err == nil
}
