package tokenizer

import (
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// A temporary regexp2 adapter until tokenizer/split lands.
func init() {
	compileSplit = func(p string) (scanner, error) {
		re, err := regexp2.Compile(p, regexp2.None)
		if err != nil {
			return nil, err
		}
		return &reScanner{re: re}, nil
	}
}

type reScanner struct {
	mu   sync.Mutex
	re   *regexp2.Regexp
	last string
	ends map[int]int
}

func (r *reScanner) Next(s string, start int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends == nil || r.last != s {
		r.last = s
		r.ends = map[int]int{}
		// byte offset of each rune index
		offs := make([]int, 0, len(s)+1)
		for i := range s {
			offs = append(offs, i)
		}
		offs = append(offs, len(s))
		_ = utf8.RuneLen
		prev := 0
		m, _ := r.re.FindStringMatch(s)
		for m != nil {
			a, b := offs[m.Index], offs[m.Index+m.Length]
			if b > a {
				if a > prev {
					r.ends[prev] = a
				}
				r.ends[a] = b
				prev = b
			}
			m, _ = r.re.FindNextMatch(m)
		}
		if prev < len(s) {
			r.ends[prev] = len(s)
		}
	}
	if e, ok := r.ends[start]; ok {
		return e
	}
	return len(s)
}
