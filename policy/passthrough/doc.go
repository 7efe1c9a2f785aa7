// Package passthrough implements the passthrough policy: every request to the first available
// worker, reading no load or cache state (spec: Passthrough). With more than one worker it logs
// a warning once per model and keeps sending everything to the first available one.
package passthrough
