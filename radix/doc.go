// Package radix holds lock-sharded, arena-backed prefix trees for cache-aware routing.
package radix
