// Package mesh will hold the high-availability gossip mesh (SWIM membership, CRDT state sync).
//
// It is a stub until the mesh issue lands.
package mesh
