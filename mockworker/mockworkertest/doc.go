// Package mockworkertest starts mock engine fleets for the tests of other packages (the
// gateway's end-to-end, discovery and Helm chart tests, the load generator's PD tests):
// Start fails the test when a fleet does not start and closes it when the test ends.
//
// Concurrency: Start may be called from parallel tests; each fleet is its own.
//
// Ownership: the Config is copied; the fleet belongs to the test that started it.
package mockworkertest
