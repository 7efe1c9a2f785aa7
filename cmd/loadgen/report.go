package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/loadgen"
)

// reportCommand renders the HTML report (and the text summary) of a saved result, so a
// report can be made after the fact, e.g. from a CI artifact.
func reportCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	html := fs.String("html", "", "write the HTML report to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen report result.json [--html report.html]")
		fs.PrintDefaults()
	}
	files, err := cli.ParseStd(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "loadgen report: %v\n", err)
		return exitUsage
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "loadgen report: want one result file, got %d\n", len(files))
		return exitUsage
	}
	res, err := loadgen.ReadResultFile(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "loadgen report: %v\n", err)
		return exitFail
	}
	printSummary(stdout, res)
	if *html != "" {
		if err := writeFile(*html, func(w io.Writer) error { return loadgen.WriteHTML(w, res) }); err != nil {
			fmt.Fprintf(stderr, "loadgen report: cannot write HTML report: %v\n", err)
			return exitFail
		}
	}
	return exitOK
}
