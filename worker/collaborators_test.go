package worker

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
)

// TestCheckCollaboratorsNamesTheNilOne: each nil collaborator is refused with its field and
// the DefaultConfig that sets it; all three set pass.
func TestCheckCollaboratorsNamesTheNilOne(t *testing.T) {
	clk, set, log := clock.Clock(clock.Real{}), metrics.NewSet(), slog.Default()
	if err := CheckCollaborators("health", clk, set, log); err != nil {
		t.Fatalf("all set: %v", err)
	}
	for _, tc := range []struct {
		field string
		err   error
	}{
		{"Clock", CheckCollaborators("health", nil, set, log)},
		{"Metrics", CheckCollaborators("health", clk, nil, log)},
		{"Logger", CheckCollaborators("health", clk, set, nil)},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), "health.Config."+tc.field+" is nil") ||
			!strings.Contains(tc.err.Error(), "health.DefaultConfig()") {
			t.Errorf("nil %s: %v", tc.field, tc.err)
		}
	}
}
