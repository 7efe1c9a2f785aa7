package loadgentest

import (
	"testing"
)

func TestPrefixCacheCountsLeadingBlocks(t *testing.T) {
	s := &Server{opts: Options{CacheBlock: 2}, cache: map[uint64]struct{}{}}
	words, cached := s.lookupPrefix([][]byte{[]byte("a b c d"), []byte("e")})
	if words != 5 || cached != 0 {
		t.Fatalf("first prompt: %d words %d cached", words, cached)
	}
	// Same first two blocks (a b | c d), then a different third.
	if words, cached = s.lookupPrefix([][]byte{[]byte("a  b\nc d"), []byte("x y")}); words != 6 || cached != 4 {
		t.Fatalf("shared prefix: %d words %d cached, want 6 and 4", words, cached)
	}
	// A hit after a miss does not count: caches match prefixes only.
	if _, cached = s.lookupPrefix([][]byte{[]byte("z z c d")}); cached != 0 {
		t.Fatalf("non-prefix block counted: %d", cached)
	}
}

// TestCloseRightAfterStart guards against a race in which Close ran before the serve
// goroutine registered its listener with fasthttp, leaving Close waiting forever.
func TestCloseRightAfterStart(t *testing.T) {
	for range 200 {
		s, err := Start(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
