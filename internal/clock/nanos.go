package clock

import "time"

// NanosOf returns t on the scale of Nanos. t must carry a monotonic reading (time.Now's do,
// and times derived from them by Add), so that a wall-clock step does not move it.
func NanosOf(t time.Time) int64 { return int64(t.Sub(start)) }

// TimeOf returns the time of n, a reading on the scale of Nanos: how a record stamped with
// Nanos is shown or exported with wall-clock times.
func TimeOf(n int64) time.Time { return start.Add(time.Duration(n)) }
