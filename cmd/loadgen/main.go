package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return runCommand(args[1:], stdout, stderr)
		case "compare":
			return compareCommand(args[1:], stdout, stderr)
		case "report":
			return reportCommand(args[1:], stdout, stderr)
		case "fakeserver":
			return fakeServerCommand(args[1:], stdout, stderr)
		case "help", "-h", "--help", "-help":
			fmt.Fprint(stdout, usage)
			return exitOK
		}
	}
	return runCommand(args, stdout, stderr)
}

const usage = `loadgen: load generator for OpenAI-compatible endpoints

  loadgen [run] --base-url http://host:port/v1 --model M [flags]   run a benchmark
  loadgen [run] --pd-prefill URL --pd-decode URL --model M [flags] the same, each request sent to
                                                                 a prefill and a decode worker (PD)
  loadgen compare base.json new.json --max-regression 5%         exit 1 on a regression
  loadgen report result.json --html report.html                  summary and HTML of a saved result
  loadgen fakeserver --listen 127.0.0.1:8000                     serve a fake engine

Run "loadgen run -h" (or compare, report, fakeserver) for the flags.
`
