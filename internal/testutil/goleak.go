package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs the package's tests and fails it if a goroutine started by them is left
// behind. fasthttp's own background goroutines are not ours and end by themselves: the
// process-wide date updater and DNS-cache cleaner of the shared dialer, a server pool's idle
// worker cleaner (exits within 10 s of Stop), a client's idle-connection cleaner (exits once
// its pool is empty) and a multi-host client's host cleaner (exits once it holds no host), so
// they are ignored; everything else must have stopped.
func VerifyNoLeaks(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}
