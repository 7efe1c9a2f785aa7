package main

import "testing"

// TestRustLogLevel: the spec's debug recipes (RUST_LOG) set SMG-Go's one level to the most
// verbose level they name; one without a level is ignored, and said to be.
func TestRustLogLevel(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"warn,smg=info,smg_mesh=debug,smg::mesh=debug,smg::mesh_discovery=debug", "debug"}, // high-availability.md
		{"info,smg::service_discovery=debug", "debug"},                                      // service-discovery.md
		{"warn", "warn"},
		{"smg=trace", "debug"},
		{"off", "error"},
		{"smg", "info"}, // no level: --log-level's
	} {
		got, note := rustLogLevel(tc.v, "info")
		if got != tc.want || note == "" {
			t.Errorf("RUST_LOG=%q: level %q (note %q), want %q", tc.v, got, note, tc.want)
		}
	}
}
