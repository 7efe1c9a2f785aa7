package main

import (
	"io"
	"strings"
	"testing"
)

// FuzzParseFlags: any command line either fails with a message or gives a valid Config.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{
		"--port 0 --count 3",
		"--mode engine --time-scale 100 --seed 7 --kv-tokens 4096 --block-size 16",
		"--token-interval-ms 2.5 --decode-base-ms 1 --decode-per-req-ms 0.01",
		"--dialect vllm --server fasthttp --event-loops 2",
		"--role prefill --bootstrap-port 0 --kv-engine-id e --kv-transfer-timeout-ms 200",
		"--role decode --bootstrap-port 8998", "--role x", "--kv-transfer-timeout-ms 1e300",
		"--port -1", "--count x", "stray", "--prefill-tps NaN", "--time-scale +Inf",
		"--mode engine --kv-events-port 0 --kv-events-encoding array --kv-events-replay 5",
		"--kv-events-port 5557", "--mode engine --kv-events-port 65535 --count 2", "--mode engine --kv-events-port 0 --kv-events-encoding json",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cfg, _, err := parseFlags(strings.Fields(line), io.Discard)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%q parsed into an invalid config: %v", line, err)
		}
	})
}
