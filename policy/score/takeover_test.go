package score_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/score"
	"github.com/smg-go/smg/worker"
)

// generation is one snapshot's order over its group, with the scan's state beside it.
type generation struct {
	ws                   []*worker.Worker
	rk                   *score.Ranking
	turnsRank, turnsScan *score.Turns
	speeds               *score.SpeedFlags
	rndRank, rndScan     *rand.Rand
}

func newGeneration(s *score.Scorer, line *score.Succession, ws []*worker.Worker, fewest bool, seed uint64) *generation {
	g := &generation{ws: ws, rndRank: rand.New(rand.NewPCG(seed, 1)), rndScan: rand.New(rand.NewPCG(seed, 1)), speeds: score.NewSpeedFlags(len(ws))}
	if fewest {
		g.rk = line.Succeed(s.NewFewestRanking(ws))
		return g
	}
	g.turnsRank, g.turnsScan = score.NewTurns(len(ws), rand.New(rand.NewPCG(seed, 2))), score.NewTurns(len(ws), rand.New(rand.NewPCG(seed, 2)))
	g.rk = line.Succeed(s.NewRanking(ws, g.turnsRank, g.speeds))
	return g
}

// check picks with the generation's order and with the scan, and fails unless they agree.
func (g *generation) check(t *testing.T, s *score.Scorer, req *policy.Request, rate score.Rate, what string) {
	t.Helper()
	if g.turnsRank == nil {
		got := g.rk.PickFewest(req, rate.TokensPerSecond, g.rndRank)
		if want := fewestScan(s, req, g.ws, rate.TokensPerSecond, g.rndScan); got != want {
			t.Fatalf("%s: PickFewest picked %v, the scan %v", what, got, want)
		}
		return
	}
	g.speeds.Observe(g.ws)
	got, gi := g.rk.Pick(req, rate, g.rndRank, policy.NoHotLimit)
	want, wi := s.LowestInTurnAt(req, g.ws, rate, g.rndScan, policy.NoHotLimit, g.turnsScan, g.speeds)
	if got != want || gi != wi {
		t.Fatalf("%s: ranking picked place %d, the scan %d", what, gi, wi)
	}
	if gi >= 0 {
		g.turnsRank.Note(gi)
		g.turnsScan.Note(wi)
	}
}

// TestTakeOverPicksAsTheScan: through a line of snapshots whose groups lose and regain
// workers, each new order, which took the watch over from the one before, picks as the scan,
// and so does the order it replaced (the requests still holding the previous route table);
// the workers of the current group are watched once each, the others not at all.
func TestTakeOverPicksAsTheScan(t *testing.T) {
	for _, fewest := range []bool{false, true} {
		for seed := range uint64(3) {
			fl := policytest.NewFleet(t, 50+int(seed)*13, "m")
			s := score.New(score.DefaultConfig())
			var line score.Succession
			churn := newLoadChurn(t, fl, seed)
			rates := rand.New(rand.NewPCG(seed, 3))
			cur := newGeneration(s, &line, fl.Workers, fewest, seed)
			var prev *generation
			for step := range 3000 {
				if step%150 == 149 { // the next snapshot: up to three workers left the group
					ws := fl.Workers
					for range churn.rng.IntN(4) {
						i := churn.rng.IntN(len(ws))
						ws = append(ws[:i:i], ws[i+1:]...)
					}
					prev, cur = cur, newGeneration(s, &line, ws, fewest, seed+uint64(step))
				}
				for range 1 + churn.rng.IntN(4) {
					churn.step()
				}
				req := churn.request()
				rate := churnRates[rates.IntN(len(churnRates))]
				what := func(g string) string {
					return fmt.Sprintf("%s order, fewest %v, seed %d, step %d", g, fewest, seed, step)
				}
				cur.check(t, s, req, rate, what("current"))
				if prev != nil {
					prev.check(t, s, req, rate, what("replaced"))
				}
				if step%150 == 149 || step == 0 {
					in := map[*worker.Worker]bool{}
					for _, w := range cur.ws {
						in[w] = true
					}
					for _, w := range fl.Workers {
						if want := map[bool]int{false: 0, true: 1}[in[w]]; w.Watchers() != want {
							t.Fatalf("%s: a worker in the group %v has %d watchers, want %d", what("current"), in[w], w.Watchers(), want)
						}
					}
				}
			}
		}
	}
}
