package fastpath

import (
	"time"

	"github.com/valyala/fasthttp"
)

// pause waits d before a retry, or less when the client closes its connection first. It
// reports whether the client is still there; when it is not, the connection is marked to
// close and the caller ends the request at once, which frees everything it holds.
//
// fasthttp tells a handler nothing about its client, so pause watches the connection itself
// where it can (clientLeft: a real socket); elsewhere (in-memory connections, TLS) it sleeps.
func pause(ctx *fasthttp.RequestCtx, d time.Duration) bool {
	end := time.Now().Add(d)
	if b, ok := ctx.Conn().(*bridgeConn); ok { // a request the event loops handed over
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-b.st.Left():
			ctx.SetConnectionClose()
			return false
		case <-t.C:
			return true
		}
	}
	if left, watched := clientLeft(ctx, end); left {
		ctx.SetConnectionClose()
		return false
	} else if watched {
		return true
	}
	if rest := time.Until(end); rest > 0 {
		time.Sleep(rest)
	}
	return true
}
