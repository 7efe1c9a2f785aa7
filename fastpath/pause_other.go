//go:build !unix

package fastpath

import (
	"time"

	"github.com/valyala/fasthttp"
)

// clientLeft cannot watch a connection on this system: pause sleeps.
func clientLeft(*fasthttp.RequestCtx, time.Time) (left, watched bool) { return false, false }
