// Package ownedtmp makes temporary directories that carry the PID of the process that owns
// them, so that a later process can find and remove what a killed one left behind.
//
// Tests build binaries and start servers (etcd keeps a 64 MB write-ahead log) in temporary
// directories that outlive a test process killed by a timeout or a signal; on a machine that
// runs the suite many times, those leftovers fill the disk.
package ownedtmp
