package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/cli"
)

// buildInfo is what `smg --version`, `smg version` and the smg_build_info metric report.
// Every field is read from the binary's own build information, so a binary cannot claim a
// version it was not built from.
type buildInfo struct {
	// Version is the main module's version: a tag ("v1.2.3") for `go install module@v1.2.3`,
	// a pseudo-version or "(devel)" for a build from a working tree.
	Version string
	// Commit is the VCS revision the binary was built from ("unknown" without VCS stamping),
	// with "-dirty" when the working tree had uncommitted changes.
	Commit string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// readBuildInfo returns the running binary's build information; fields it cannot learn are
// "unknown" rather than empty, so that a metric label is never blank.
func readBuildInfo() buildInfo {
	bi := buildInfo{Version: "unknown", Commit: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	if info.Main.Version != "" {
		bi.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		bi.GoVersion = info.GoVersion
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && bi.Commit != "unknown" {
		bi.Commit += "-dirty"
	}
	return bi
}

// String is the one line `smg --version` prints.
func (b buildInfo) String() string {
	return fmt.Sprintf("smg %s (commit %s, %s)", b.Version, b.Commit, b.GoVersion)
}

// printVersion writes the version line: scripts read the field after "smg", people the rest.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, readBuildInfo().String())
}

// registerVersionFlag registers --version so that --help lists it; run answers it before
// parsing, as --help, so that it works whatever else the command line holds.
func registerVersionFlag(fs *cli.FlagSet) {
	fs.Bool("version", new(bool), false, "Print the version, the commit and the Go version, and exit")
}

// registerBuildInfo adds smg_build_info{version,commit,goversion} 1 to set, the usual
// Prometheus idiom for joining a build's identity onto any other series.
func registerBuildInfo(set *metrics.Set) {
	b := readBuildInfo()
	name := "smg_build_info{version=" + strconv.Quote(b.Version) + ",commit=" + strconv.Quote(b.Commit) +
		",goversion=" + strconv.Quote(b.GoVersion) + "}"
	set.NewGauge(name, func() float64 { return 1 })
}
