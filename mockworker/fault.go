package mockworker

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// faultHeader is the per-request fault injection header. Its value is a comma-separated list
// of items (spaces allowed around them):
//
//	status=NNN      answer NNN (400..599) with an OpenAI error body, no generation
//	reset           close the connection at once with a TCP reset, no answer
//	hang            never answer: hold the request until the client or the worker closes
//	abort-after=N   cut the connection after N tokens: a stream gets N events and no end;
//	                a non-streamed request gets no answer
//	slow-ttft=MS    hold the first token MS milliseconds longer (a stream's headers go at once)
//	body-sha256     answer 200 {"body_sha256":"<hex>","body_bytes":N} for the request body as
//	                received, no generation (tests that a gateway forwards a body intact)
const faultHeader = "x-mock-fault"

// fault is a parsed x-mock-fault header; the zero value injects nothing except that
// abortAfter is only meaningful when abort is set.
type fault struct {
	status     int
	reset      bool
	hang       bool
	abort      bool
	abortAfter int
	slowTTFT   time.Duration
	bodySHA256 bool
}

// parseFault parses an x-mock-fault value. An unknown item is an error, so that a typo in a
// test shows up as a 400 instead of a silently healthy answer.
func parseFault(v []byte) (fault, error) {
	var f fault
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte(","))
		item = bytes.TrimSpace(item)
		name, arg, hasArg := bytes.Cut(item, []byte("="))
		name, arg = bytes.TrimSpace(name), bytes.TrimSpace(arg)
		switch {
		case len(item) == 0:
		case !hasArg && string(name) == "hang":
			f.hang = true
		case !hasArg && string(name) == "reset":
			f.reset = true
		case !hasArg && string(name) == "body-sha256":
			f.bodySHA256 = true
		case hasArg && string(name) == "status":
			n, err := strconv.Atoi(string(arg))
			if err != nil || n < 400 || n > 599 {
				return fault{}, fmt.Errorf("%s: status=%q must be an HTTP error status 400..599", faultHeader, arg)
			}
			f.status = n
		case hasArg && string(name) == "abort-after":
			n, err := strconv.Atoi(string(arg))
			if err != nil || n < 0 || n > maxTokensLimit {
				return fault{}, fmt.Errorf("%s: abort-after=%q must be a token count from 0 to %d", faultHeader, arg, maxTokensLimit)
			}
			f.abort, f.abortAfter = true, n
		case hasArg && string(name) == "slow-ttft":
			n, err := strconv.Atoi(string(arg))
			if err != nil || n < 0 || n > int(time.Hour/time.Millisecond) {
				return fault{}, fmt.Errorf("%s: slow-ttft=%q must be milliseconds from 0 to 3600000", faultHeader, arg)
			}
			f.slowTTFT = time.Duration(n) * time.Millisecond
		default:
			return fault{}, fmt.Errorf("%s: unknown item %q (use status=NNN, reset, hang, abort-after=N, slow-ttft=MS or body-sha256)", faultHeader, item)
		}
	}
	return f, nil
}
