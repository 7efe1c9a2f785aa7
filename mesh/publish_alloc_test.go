//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation counts only hold
// without it.

package mesh

import (
	"fmt"
	"testing"

	"github.com/smg-go/smg/mesh/wire"
)

// PublishTree runs on every cache_aware routing decision with the mesh on: no allocation in
// steady state (the path buffers come back to the pool every round).
func TestPublishTreeAllocatesNothing(t *testing.T) {
	n := publishNode(t)
	paths := make([][]byte, 200)
	for i := range paths {
		paths[i] = []byte(fmt.Sprintf("<|im_start|>user\nquestion %d about the weather in a long prompt<|im_end|>", i))
	}
	round := func() {
		n.mu.Lock()
		n.trees.takeBatchesLocked()
		n.mu.Unlock()
	}
	for range 3 { // steady state: the pool holds a round's buffers
		for _, p := range paths {
			n.PublishTree("m", wire.TreeText, p, "http://10.0.0.1:8000")
		}
		round()
	}
	i := 0
	if a := testing.AllocsPerRun(100, func() {
		n.PublishTree("m", wire.TreeText, paths[i%len(paths)], "http://10.0.0.1:8000")
		i++
	}); a != 0 {
		t.Fatalf("PublishTree allocates %.1f times per decision", a)
	}
	round()
}

// PublishTokens, the token tree's decision, encodes into the pooled buffer: no allocation
// either.
func TestPublishTokensAllocatesNothing(t *testing.T) {
	n := publishNode(t)
	tokens := make([]uint32, 512)
	for i := range tokens {
		tokens[i] = uint32(i * 7919)
	}
	round := func() {
		n.mu.Lock()
		n.trees.takeBatchesLocked()
		n.mu.Unlock()
	}
	for range 3 {
		for i := range 200 {
			n.PublishTokens("m", tokens[i%64:], "http://10.0.0.1:8000")
		}
		round()
	}
	i := 0
	if a := testing.AllocsPerRun(100, func() {
		n.PublishTokens("m", tokens[i%64:], "http://10.0.0.1:8000")
		i++
	}); a != 0 {
		t.Fatalf("PublishTokens allocates %.1f times per decision", a)
	}
	round()
}
