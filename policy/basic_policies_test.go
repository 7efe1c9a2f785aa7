package policy_test

import (
	"testing"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/passthrough"
	"github.com/smg-go/smg/policy/random"
	"github.com/smg-go/smg/policy/roundrobin"
	"github.com/smg-go/smg/worker"
)

func group(reg *worker.Registry) policy.Group {
	s := reg.Current()
	return policy.Group{Model: "m", Workers: s.Workers, Snapshot: s}
}

func TestRoundRobinIsExactAndSurvivesRebuilds(t *testing.T) {
	reg, ws := fleet(t, 3)
	b := roundrobin.New()
	p := b.Build(group(reg))
	var req policy.Request
	counts := map[*worker.Worker]int{}
	for i := range 100_000 {
		res, err := p.Pick(&req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Worker != ws[i%3] {
			t.Fatalf("pick %d went to %s, want %s", i, res.Worker.URL, ws[i%3].URL)
		}
		counts[res.Worker]++
		if i == 50 {
			p = b.Build(group(reg)) // same candidate set: the rotation continues
		}
	}
	for _, w := range ws {
		if d := counts[w] - 100_000/3; d < -1 || d > 1 {
			t.Fatalf("counts %v", counts)
		}
	}
}

func TestRoundRobinSkipsExcludedAndReportsNone(t *testing.T) {
	reg, ws := fleet(t, 2)
	p := roundrobin.New().Build(group(reg))
	req := policy.Request{Exclude: []*worker.Worker{ws[0]}}
	for range 4 {
		if res, _ := p.Pick(&req); res.Worker != ws[1] {
			t.Fatal("excluded worker picked")
		}
	}
	req.Exclude = ws
	if _, err := p.Pick(&req); err != policy.ErrNoAvailableWorkers {
		t.Fatalf("err %v", err)
	}
}

func TestRandomIsUniform(t *testing.T) {
	reg, ws := fleet(t, 4)
	p := random.New(testutil.NewRand(1)).Build(group(reg))
	var req policy.Request
	counts := map[*worker.Worker]int{}
	const n = 100_000
	for range n {
		res, _ := p.Pick(&req)
		counts[res.Worker]++
	}
	for _, w := range ws {
		// 4 workers, 100,000 picks: σ ≈ 137; 5σ ≈ 700.
		if c := counts[w]; c < n/4-700 || c > n/4+700 {
			t.Fatalf("counts %v", counts)
		}
	}
	// With one worker excluded the others share evenly and the excluded one gets nothing.
	req.Exclude = []*worker.Worker{ws[0]}
	clear(counts)
	for range n {
		res, _ := p.Pick(&req)
		counts[res.Worker]++
	}
	if counts[ws[0]] != 0 {
		t.Fatal("excluded worker picked")
	}
	for _, w := range ws[1:] {
		if c := counts[w]; c < n/3-800 || c > n/3+800 {
			t.Fatalf("counts with exclusion %v", counts)
		}
	}
}

func TestPassthroughTakesFirstAvailable(t *testing.T) {
	reg, ws := fleet(t, 3)
	p := passthrough.New(testutil.Quiet).Build(group(reg))
	req := policy.Request{}
	if res, _ := p.Pick(&req); res.Worker != ws[0] {
		t.Fatal("not the first worker")
	}
	req.Exclude = []*worker.Worker{ws[0]}
	if res, _ := p.Pick(&req); res.Worker != ws[1] {
		t.Fatal("not the first available worker")
	}
}
