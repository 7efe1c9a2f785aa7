package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/loadgen"
)

// compareFlags is the compare command's flag set.
type compareFlags struct {
	set   *flag.FlagSet
	limit *string
}

func newCompareFlags(stderr io.Writer) compareFlags {
	fs := flag.NewFlagSet("loadgen compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	limit := fs.String("max-regression", "5%", "largest allowed worsening of any metric: 5% or 0.05")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen compare base.json new.json [--max-regression 5%]\n\nPrints every metric of both runs side by side with the change, then the regressions; exits 1 if any.")
		fs.PrintDefaults()
	}
	return compareFlags{set: fs, limit: limit}
}

func compareCommand(args []string, stdout, stderr io.Writer) int {
	flags := newCompareFlags(stderr)
	fs, limit := flags.set, flags.limit
	files, err := cli.ParseStd(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "loadgen compare: %v\n", err)
		return exitUsage
	}
	if len(files) != 2 {
		fmt.Fprintf(stderr, "loadgen compare: want two result files (base.json new.json), got %d\n", len(files))
		return exitUsage
	}
	maxRegression, err := loadgen.ParseFraction(*limit)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen compare: invalid value for flag --max-regression: %v\n", err)
		return exitUsage
	}
	base, err := loadgen.ReadResultFile(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "loadgen compare: %v\n", err)
		return exitFail
	}
	newer, err := loadgen.ReadResultFile(files[1])
	if err != nil {
		fmt.Fprintf(stderr, "loadgen compare: %v\n", err)
		return exitFail
	}
	if err := loadgen.WriteDiffTable(stdout, loadgen.Diff(base, newer, maxRegression)); err != nil {
		fmt.Fprintf(stderr, "loadgen compare: %v\n", err)
		return exitFail
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
