//go:build race

package radix

// raceEnabled scales the heavier tests down under the race detector, which makes
// them several times slower.
const raceEnabled = true
