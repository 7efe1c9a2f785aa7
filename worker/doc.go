// Package worker holds worker specs, live worker state and the registry that publishes snapshots.
package worker
