package policy_test

import (
	"testing"

	"github.com/smg-go/smg/policy"
)

func TestDispatchTokens(t *testing.T) {
	cases := []struct {
		req  policy.Request
		want int
	}{
		{policy.Request{Tokens: []uint32{1, 2, 3}, Text: make([]byte, 400)}, 3}, // token ids win
		{policy.Request{Tokens: []uint32{}}, 0},                                 // an empty id list is known
		{policy.Request{Text: make([]byte, 11_004)}, 2751},                      // bytes / 4
		{policy.Request{Text: []byte("hi")}, 1},                                 // never 0 for a text
		{policy.Request{}, -1},                                                  // unknown: the mean
	}
	for i, c := range cases {
		if got := policy.DispatchTokens(&c.req); got != c.want {
			t.Errorf("case %d: DispatchTokens = %d, want %d", i, got, c.want)
		}
	}
}
