package mesh

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/mesh/wire"
)

// BenchmarkPublishTree is one cache_aware routing decision handed to the mesh: a 2 KB prompt
// (a chat template and a question), queued, with a gossip round draining the queue every
// 1,000 decisions as production does every second.
func BenchmarkPublishTree(b *testing.B) {
	n := publishNode(b)
	path := []byte(strings.Repeat("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", 34))
	b.ReportAllocs()
	b.SetBytes(int64(len(path)))
	b.ResetTimer()
	for i := range b.N {
		n.PublishTree("m", wire.TreeText, path, "http://10.0.0.1:8000")
		if i%1000 == 999 {
			n.mu.Lock()
			n.trees.takeBatchesLocked()
			n.mu.Unlock()
		}
	}
}

func publishNode(tb testing.TB) *Node {
	tb.Helper()
	deps := testDeps()
	deps.Transport = &memTransport{net: newMemNet(tb), addr: addrOf(0)}
	deps.Trees = &RadixTrees{}
	n, err := NewNode(nodeConfig(tb, "a", addrOf(0)), deps)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
