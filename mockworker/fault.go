package mockworker

import (
	"bytes"
	"fmt"
	"strconv"
)

// faultHeader is the per-request fault injection header. Its value is a comma-separated list
// of items (spaces allowed around them):
//
//	status=NNN   answer with status NNN (400..599) and an OpenAI error body, no generation
//	hang         never answer: hold the request until the client or the worker closes
const faultHeader = "x-mock-fault"

// fault is a parsed x-mock-fault header; the zero value injects nothing.
type fault struct {
	status int
	hang   bool
}

// parseFault parses an x-mock-fault value. An unknown item is an error, so that a typo in a
// test shows up as a 400 instead of a silently healthy answer.
func parseFault(v []byte) (fault, error) {
	var f fault
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		item = bytes.TrimSpace(item)
		name, arg, hasArg := bytes.Cut(item, []byte("="))
		name = bytes.TrimSpace(name)
		switch {
		case len(item) == 0:
		case string(name) == "hang" && !hasArg:
			f.hang = true
		case string(name) == "status" && hasArg:
			n, err := strconv.Atoi(string(bytes.TrimSpace(arg)))
			if err != nil || n < 400 || n > 599 {
				return fault{}, fmt.Errorf("%s: status=%q must be an HTTP error status 400..599", faultHeader, arg)
			}
			f.status = n
		default:
			return fault{}, fmt.Errorf("%s: unknown item %q (use status=NNN or hang)", faultHeader, item)
		}
	}
	return f, nil
}
