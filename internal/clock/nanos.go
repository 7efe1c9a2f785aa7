package clock

import "time"

// NanosOf returns t on the scale of Nanos. t must carry a monotonic reading (time.Now's do,
// and times derived from them by Add), so that a wall-clock step does not move it.
func NanosOf(t time.Time) int64 { return int64(t.Sub(start)) }

// TimeOf returns the time of n, a reading on the scale of Nanos: how a record stamped with
// Nanos is shown or exported with wall-clock times.
func TimeOf(n int64) time.Time { return start.Add(time.Duration(n)) }

// OriginOf returns the time at which c's Nanos reads 0, so that a reading n is the time
// OriginOf(c).Add(n): for Real the process's start (as TimeOf), for a Fake the time it was
// made at.
func OriginOf(c Clock) time.Time {
	switch c := c.(type) {
	case Real:
		return start
	case *Fake:
		return c.origin
	}
	return c.Now().Add(-time.Duration(c.Nanos()))
}
