package http1

import (
	"net/http"
	"strconv"
)

// AppendStatusLine appends the status line of an HTTP/1.1 answer, "HTTP/1.1 <status>
// <reason>\r\n", with net/http's reason phrase (a switch: no allocation). A status net/http
// has no phrase for gets "Status": RFC 9112 allows an empty reason, but not every client
// reads one.
func AppendStatusLine(dst []byte, status int) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	reason := http.StatusText(status)
	if reason == "" {
		reason = "Status"
	}
	dst = append(dst, reason...)
	return append(dst, "\r\n"...)
}
