package main

import (
	"fmt"
	"io"

	"github.com/smg-go/smg/loadgen"
)

// compareFlags is the compare command's flag set.
type compareFlags struct {
	cmd   *command
	limit *string
}

func newCompareFlags(stderr io.Writer) compareFlags {
	cmd := newCommand("loadgen compare", "loadgen compare",
		"usage: loadgen compare base.json new.json [--max-regression 5%]\n\nPrints every metric of both runs side by side with the change, then the regressions; exits 1 if any.", stderr)
	limit := cmd.flags.String("max-regression", "5%", "largest allowed worsening of any metric: 5% or 0.05")
	return compareFlags{cmd: cmd, limit: limit}
}

func compareCommand(args []string, stdout, stderr io.Writer) int {
	flags := newCompareFlags(stderr)
	cmd, limit := flags.cmd, flags.limit
	files, code, done := cmd.parse(args)
	if done {
		return code
	}
	if len(files) != 2 {
		return cmd.fail(exitUsage, "want two result files (base.json new.json), got %d", len(files))
	}
	maxRegression, err := loadgen.ParseFraction(*limit)
	if err != nil {
		return cmd.fail(exitUsage, "invalid value for flag --max-regression: %v", err)
	}
	base, err := loadgen.ReadResultFile(files[0])
	if err != nil {
		return cmd.fail(exitFail, "%v", err)
	}
	newer, err := loadgen.ReadResultFile(files[1])
	if err != nil {
		return cmd.fail(exitFail, "%v", err)
	}
	if err := loadgen.WriteDiffTable(stdout, loadgen.Diff(base, newer, maxRegression)); err != nil {
		return cmd.fail(exitFail, "%v", err)
	}
	regressions := loadgen.Compare(base, newer, maxRegression)
	fmt.Fprintln(stdout)
	if len(regressions) == 0 {
		fmt.Fprintf(stdout, "no regression beyond %s\n", *limit)
		return exitOK
	}
	for _, r := range regressions {
		fmt.Fprintf(stdout, "REGRESSION %s (limit %s)\n", r, *limit)
	}
	return exitFail
}
