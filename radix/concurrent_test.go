package radix

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentInsertsMatchModel runs MatchAndInsert, Insert and Match from several
// goroutines. Stamps keep the newest time and tenant sets are unions, so the final
// content does not depend on the interleaving: it must equal the model fed the same
// operations in any order.
func TestConcurrentInsertsMatchModel(t *testing.T) {
	for _, cfg := range []Config{{Shards: 1}, {Shards: 8, ShardPrefix: 2}} {
		t.Run(fmt.Sprintf("shards=%d", cfg.Shards), func(t *testing.T) {
			c, err := newCore(cfg.withDefaults(false), false)
			if err != nil {
				t.Fatal(err)
			}
			const workers = 4
			opsPer := 600
			if raceEnabled {
				opsPer = 200
			}
			type op struct {
				key    []byte
				tenant Tenant
				now    int64
			}
			plans := make([][]op, workers)
			for w := range plans {
				rng := rand.New(rand.NewPCG(uint64(w), 9))
				for i := range opsPer {
					plans[w] = append(plans[w], op{randomPieces(rng), Tenant(rng.IntN(10)), int64(rng.IntN(1000) + i)})
				}
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					dst := make([]Tenant, 0, MaxMatchTenants)
					for i, o := range plans[w] {
						switch i % 3 {
						case 0:
							c.matchAndInsert(o.key, o.now, &fixedChooser{t: o.tenant}, 0)
						case 1:
							c.matchAndInsert(o.key, o.now, nil, o.tenant)
						default:
							c.matchAndInsert(o.key, o.now, nil, o.tenant)
							c.match(o.key, dst)
						}
					}
				})
			}
			wg.Wait()
			m := newModel(c)
			for _, plan := range plans {
				for _, o := range plan {
					m.insert(o.key, o.tenant, o.now)
				}
			}
			if err := checkInvariants(c); err != nil {
				t.Fatal(err)
			}
			got, _ := treeContent(c, 256)
			if d := diff(m.content(), got); d != "" {
				t.Fatalf("content after concurrent inserts: %s", d)
			}
		})
	}
}

// TestConcurrentEvictRemoveWalk mixes the hot path with Evict, RemoveTenant,
// ReadPage and Stats on other goroutines; the structure must stay consistent and
// the final eviction must meet its budget.
func TestConcurrentEvictRemoveWalk(t *testing.T) {
	c, err := newCore(Config{Shards: 4, ShardPrefix: 1, EvictSliceNodes: 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	rounds := 400
	if raceEnabled {
		rounds = 150
	}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			g := newTextGen(uint64(w))
			dst := make([]Tenant, 0, MaxMatchTenants)
			for i := range rounds * 4 {
				key := g.appendChars(nil, 1+rng.IntN(60))
				c.matchAndInsert(key, int64(i), &fixedChooser{t: Tenant(rng.IntN(6))}, 0)
				c.match(key, dst)
			}
		})
	}
	wg.Go(func() {
		var p Page
		for i := range rounds {
			switch i % 4 {
			case 0:
				c.evict(c.size() / 2)
			case 1:
				c.removeTenant(Tenant(i % 6))
			case 2:
				for cur := Cursor(0); cur != CursorDone; {
					cur = c.readPage(cur, 200, &p)
				}
			default:
				c.stats()
			}
		}
	})
	wg.Wait()
	if err := checkInvariants(c); err != nil {
		t.Fatal(err)
	}
	if st := c.evict(100); st.After > 100 {
		t.Fatalf("Evict(100) left %d", st.After)
	}
	if err := checkInvariants(c); err != nil {
		t.Fatal(err)
	}
}
