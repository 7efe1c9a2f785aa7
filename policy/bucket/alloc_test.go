//go:build !race

package bucket

import (
	"strings"
	"testing"

	"github.com/smg-go/smg/policy"
)

func TestPickAllocatesNothing(t *testing.T) {
	_, _, p := setup(t, 8, DefaultConfig())
	req := &policy.Request{Text: []byte(strings.Repeat("x", 3000))}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := p.Pick(req); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Pick allocates %v times per call, want 0", n)
	}
}
