// Package archtest holds the test that keeps DESIGN.md §2's import rules true as the tree
// grows. It has no code of its own.
package archtest
