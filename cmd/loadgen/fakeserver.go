package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/smg-go/smg/loadgen/loadgentest"
)

// fakeServerCommand serves loadgentest's fake engine: a trivial server to measure the load
// generator itself, or to try loadgen without an engine.
func fakeServerCommand(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("loadgen fakeserver", "loadgen fakeserver", "", stderr)
	fs := cmd.flags
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	var opts loadgentest.Options
	fs.StringVar(&opts.WorkerID, "worker-id", "", "x-mock-worker-id header value")
	fs.DurationVar(&opts.TokenDelay, "token-delay", 0, "pause between streamed tokens")
	fs.IntVar(&opts.FailEvery, "fail-every", 0, "answer every n-th request with 503 (0: never)")
	fs.IntVar(&opts.CacheBlock, "cache-block", 16, "prefix cache block size in words")
	rest, code, done := cmd.parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return cmd.fail(exitUsage, "unexpected argument %q", rest[0])
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return cmd.fail(exitFail, "cannot listen on %s (flag --listen): %v", *listen, err)
	}
	srv, err := loadgentest.Serve(ln, opts)
	if err != nil {
		return cmd.fail(exitFail, "%v", err)
	}
	fmt.Fprintf(stdout, "fake engine serving %s\n", srv.BaseURL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if err := srv.Close(); err != nil {
		return cmd.fail(exitFail, "%v", err)
	}
	return exitOK
}
