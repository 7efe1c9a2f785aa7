package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/loadgen/loadgentest"
)

// fakeServerCommand serves loadgentest's fake engine: a trivial server to measure the load
// generator itself, or to try loadgen without an engine.
func fakeServerCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen fakeserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	var opts loadgentest.Options
	fs.StringVar(&opts.WorkerID, "worker-id", "", "x-mock-worker-id header value")
	fs.DurationVar(&opts.TokenDelay, "token-delay", 0, "pause between streamed tokens")
	fs.IntVar(&opts.FailEvery, "fail-every", 0, "answer every n-th request with 503 (0: never)")
	fs.IntVar(&opts.CacheBlock, "cache-block", 16, "prefix cache block size in words")
	rest, err := cli.ParseStd(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "loadgen fakeserver: %v\n", err)
		return exitUsage
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "loadgen fakeserver: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen fakeserver: cannot listen on %s (flag --listen): %v\n", *listen, err)
		return exitFail
	}
	srv, err := loadgentest.Serve(ln, opts)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen fakeserver: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "fake engine serving %s\n", srv.BaseURL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "loadgen fakeserver: %v\n", err)
		return exitFail
	}
	return exitOK
}
