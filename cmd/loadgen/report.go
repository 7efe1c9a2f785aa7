package main

import (
	"io"

	"github.com/smg-go/smg/loadgen"
)

// reportCommand renders the HTML report (and the text summary) of a saved result, so a
// report can be made after the fact, e.g. from a CI artifact.
func reportCommand(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("loadgen report", "loadgen report", "usage: loadgen report result.json [--html report.html]", stderr)
	html := cmd.flags.String("html", "", "write the HTML report to this file")
	files, code, done := cmd.parse(args)
	if done {
		return code
	}
	if len(files) != 1 {
		return cmd.fail(exitUsage, "want one result file, got %d", len(files))
	}
	res, err := loadgen.ReadResultFile(files[0])
	if err != nil {
		return cmd.fail(exitFail, "%v", err)
	}
	printSummary(stdout, res)
	if err := writeHTML(*html, res); err != nil {
		return cmd.fail(exitFail, "cannot write HTML report: %v", err)
	}
	return exitOK
}
