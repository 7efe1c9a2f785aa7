package main

import (
	"slices"
	"strings"
	"testing"
)

func FuzzParseBoundaries(f *testing.F) {
	for _, s := range []string{"2048,8192", "", " 16 , 64 ", "8,4", "x", "1,1", "-3", strings.Repeat("1,", 20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		bs, err := parseBoundaries(v)
		if err != nil {
			return
		}
		for i, b := range bs {
			if b < 1 || (i > 0 && b <= bs[i-1]) {
				t.Fatalf("parseBoundaries(%q) = %v: not positive and strictly ascending", v, bs)
			}
		}
		// What it accepted round-trips through the form the help shows.
		again, err := parseBoundaries(boundaries(bs))
		if err != nil || !slices.Equal(again, bs) {
			t.Fatalf("round trip of %v: %v, %v", bs, again, err)
		}
	})
}
