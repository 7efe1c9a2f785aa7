// Package random implements the random policy: every available worker equally likely, no
// state (spec: Random).
package random
