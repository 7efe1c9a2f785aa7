package stall

import "time"

// Typical is the fleet's typical time to first byte (0 until one was measured).
func (m *Monitor) Typical() time.Duration { return time.Duration(m.typical) }
