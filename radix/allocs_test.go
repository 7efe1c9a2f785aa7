//go:build !race

package radix

import "testing"

// The hot operations allocate nothing once the arenas have grown. Each test grows
// the tree first, then measures operations whose storage fits in what was grown.

func TestMatchAllocatesNothing(t *testing.T) {
	f := newBenchFixture(t, 4096, 100, Config{})
	p := f.prompt(nil, 0)
	dst := make([]Tenant, 0, MaxMatchTenants)
	if n := testing.AllocsPerRun(1000, func() { f.tree.Match(p, dst) }); n != 0 {
		t.Fatalf("Match: %v allocations per run", n)
	}
}

// TestMatchAndInsertAllocatesNothing inserts new tails, splitting an edge each
// time, into a tree that held the same amount before it was reset.
func TestMatchAndInsertAllocatesNothing(t *testing.T) {
	f := newBenchFixture(t, 4096, 100, Config{})
	const runs = 500
	prompts := make([][]byte, runs+1) // AllocsPerRun makes one extra warm-up call
	for i := range prompts {
		prompts[i] = f.prompt(nil, i)
	}
	ch := &cacheChooser{tenants: 100}
	for _, p := range prompts {
		f.now++
		f.tree.MatchAndInsert(p, f.now, ch)
	}
	f.reset()
	i := 0
	n := testing.AllocsPerRun(runs, func() {
		f.now++
		if r := f.tree.MatchAndInsert(prompts[i], f.now, ch); !r.Inserted || r.MatchedChars < 3000 {
			t.Fatalf("prompt %d: %+v", i, r)
		}
		i++
	})
	if n != 0 {
		t.Fatalf("MatchAndInsert: %v allocations per run", n)
	}
}

func TestInsertAllocatesNothing(t *testing.T) {
	f := newBenchFixture(t, 4096, 100, Config{})
	const runs = 500
	prompts := make([][]byte, runs+1)
	for i := range prompts {
		prompts[i] = f.prompt(nil, i)
	}
	for _, p := range prompts {
		f.now++
		f.tree.Insert(p, 7, f.now)
	}
	f.reset()
	i := 0
	n := testing.AllocsPerRun(runs, func() {
		f.now++
		f.tree.Insert(prompts[i], Tenant(i%100), f.now)
		i++
	})
	if n != 0 {
		t.Fatalf("Insert: %v allocations per run", n)
	}
}

func TestTokenTreeAllocatesNothing(t *testing.T) {
	tr, err := NewTokenTree(DefaultTokenConfig())
	if err != nil {
		t.Fatal(err)
	}
	const runs = 300
	seqs := make([][]uint32, runs+1)
	for i := range seqs {
		seqs[i] = make([]uint32, 1024)
		for j := range seqs[i] {
			seqs[i][j] = uint32(j)
			if j >= 700 {
				seqs[i][j] = uint32(i*7919 + j)
			}
		}
	}
	ch := &fixedChooser{t: 3}
	for _, s := range seqs {
		tr.MatchAndInsert(s, 1, ch)
	}
	for tn := range Tenant(4) {
		tr.RemoveTenant(tn)
	}
	tr.Insert(seqs[0][:800], 1, 1)
	i := 0
	dst := make([]Tenant, 0, MaxMatchTenants)
	n := testing.AllocsPerRun(runs, func() {
		tr.MatchAndInsert(seqs[i], int64(i), ch)
		tr.Match(seqs[i], dst)
		i++
	})
	if n != 0 {
		t.Fatalf("token MatchAndInsert and Match: %v allocations per run", n)
	}
}

// liveChooser is cacheChooser that finds every hold with an odd stamp lapsed.
type liveChooser struct{ cacheChooser }

func (*liveChooser) Live(_ Tenant, stamp int64) bool { return stamp%2 == 0 }

// TestMatchAndInsertWithLiveChooserAllocatesNothing is TestMatchAndInsertAllocatesNothing
// with a LiveChooser, whose match walks up the path.
func TestMatchAndInsertWithLiveChooserAllocatesNothing(t *testing.T) {
	f := newBenchFixture(t, 4096, 100, Config{})
	const runs = 500
	prompts := make([][]byte, runs+1)
	for i := range prompts {
		prompts[i] = f.prompt(nil, i)
	}
	ch := &liveChooser{cacheChooser{tenants: 100}}
	for _, p := range prompts {
		f.now++
		f.tree.MatchAndInsert(p, f.now, ch)
	}
	f.reset()
	i := 0
	n := testing.AllocsPerRun(runs, func() {
		f.now++
		if r := f.tree.MatchAndInsert(prompts[i], f.now, ch); !r.Inserted {
			t.Fatalf("prompt %d: %+v", i, r)
		}
		i++
	})
	if n != 0 {
		t.Fatalf("MatchAndInsert with a LiveChooser: %v allocations per run", n)
	}
}
