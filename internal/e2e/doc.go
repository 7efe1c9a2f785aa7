// Package e2e runs the real binaries (smg, mockworker, loadgen) as processes on loopback
// addresses and gives tests small helpers to drive them. It imports nothing of the gateway:
// tests see the product the way users do, through flags, HTTP and exit codes.
//
// Binaries are built once per test process into a temporary directory (go build, so the Go
// build cache makes repeated runs cheap). Every process a test starts is stopped by the
// test's cleanup, by PID.
package e2e
