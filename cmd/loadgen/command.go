package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/smg-go/smg/internal/cli"
)

// command is one loadgen command's flag set and the prefix of the messages it prints.
type command struct {
	flags  *flag.FlagSet
	prefix string
	stderr io.Writer
}

// newCommand returns an empty command called name ("loadgen report"), whose messages start
// with prefix; a non-empty usage line replaces the flag package's own above the flags.
func newCommand(name, prefix, usage string, stderr io.Writer) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if usage != "" {
		fs.Usage = func() {
			fmt.Fprintln(stderr, usage)
			fs.PrintDefaults()
		}
	}
	return &command{flags: fs, prefix: prefix, stderr: stderr}
}

// parse parses args and returns the positional arguments. When done, the command ends with
// code: help was printed (exitOK) or the usage error reported (exitUsage).
func (c *command) parse(args []string) (positional []string, code int, done bool) {
	positional, err := cli.ParseStd(c.flags, args)
	if err == nil {
		return positional, exitOK, false
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil, exitOK, true
	}
	return nil, c.fail(exitUsage, "%v", err), true
}

// fail reports a message on stderr after the command's prefix and returns code.
func (c *command) fail(code int, format string, args ...any) int {
	fmt.Fprintf(c.stderr, c.prefix+": "+format+"\n", args...)
	return code
}
