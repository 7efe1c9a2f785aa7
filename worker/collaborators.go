package worker

import (
	"fmt"
	"log/slog"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/clock"
)

// CheckCollaborators reports the first of a config's collaborators left nil, naming the
// field to set; pkg is the config's package, whose DefaultConfig sets all three. The
// monitors over the workers (health, loadmon, stall) and discovery share it, so that none
// reads a nil one as "use the default".
func CheckCollaborators(pkg string, clk clock.Clock, set *metrics.Set, log *slog.Logger) error {
	field, value := "", ""
	switch {
	case clk == nil:
		field, value = "Clock", "clock.Real{}"
	case set == nil:
		field, value = "Metrics", "a private metrics set"
	case log == nil:
		field, value = "Logger", "slog.Default()"
	default:
		return nil
	}
	return fmt.Errorf("%s.Config.%s is nil: set it, or start from %s.DefaultConfig(), which sets %s", pkg, field, pkg, value)
}
