// Command smgbench runs the benchmark suites of package bench and prints their tables; `make
// bench` runs it after `make build`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/smg-go/smg/bench"
)

func main() {
	binDir := flag.String("bin", "bin", "directory holding smg, mockworker, loadgen and bareproxy (make build)")
	duration := flag.Duration("duration", 10*time.Second, "length of each measured run")
	conns := flag.Int("connections", 32, "closed-loop client connections")
	policy := flag.String("policy", "round_robin", "gateway --policy")
	out := flag.String("out", "", "write the JSON result to this file")
	flag.Parse()

	res, err := bench.Overhead(bench.OverheadConfig{Bin: bench.BinariesIn(*binDir), Duration: *duration, Connections: *conns, Policy: *policy})
	if err != nil {
		fmt.Fprintln(os.Stderr, "smgbench:", err)
		os.Exit(1)
	}
	fmt.Printf("Overhead: %d connections, %v per run, proxy on core %d, load generator and 4 mock workers on core %d\n\n%s",
		res.Config.Connections, res.Config.Duration, res.Config.ProxyCore, res.Config.LoadCore, res.Table())
	if *out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "smgbench:", err)
			os.Exit(1)
		}
	}
}
