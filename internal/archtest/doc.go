// Package archtest holds the test that keeps docs/architecture.md's import rules true as the tree
// grows. It has no code of its own.
package archtest
