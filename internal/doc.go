// Package internal is the root of leaf helpers shared by the gateway packages; it imports nothing of ours.
package internal
