// Package roundrobin implements the round_robin policy: exact rotation over the available
// workers, with one rotation per candidate set (spec: Round Robin).
//
// The cursor of each candidate set lives in the Builder and survives snapshots, so a registry
// change that leaves a model's candidates unchanged does not restart their rotation. A set is
// identified by the ids of its workers in order; at most MaxSets cursors are kept.
package roundrobin
