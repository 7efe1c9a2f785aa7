package testutil

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs the package's tests and fails it if a goroutine started by them is left
// behind. fasthttp's own background goroutines are not ours and end by themselves: the
// process-wide date updater and DNS-cache cleaner of the shared dialer, a server pool's idle
// worker cleaner (exits within 10 s of Stop), a client's idle-connection cleaner (exits once
// its pool is empty) and a multi-host client's host cleaner (exits once it holds no host); nor
// is gnet's process-wide ants worker pool (its purge and clock goroutines), so they are ignored, as are the further library goroutines a package names in ignore;
// everything else must have stopped.
func VerifyNoLeaks(m *testing.M, ignore ...goleak.Option) {
	goleak.VerifyTestMain(m, append(ignore,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)...)
}
