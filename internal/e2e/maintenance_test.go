package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smg-go/smg/internal/testutil"
)

// TestCacheAwareTreesAreEvictedByTheShippedBinary: smg as shipped runs the policies'
// maintenance: cache_aware's tree, filled past --max-tree-size, is cut back to it.
//
// The tree gauge is set only by maintenance, after its eviction. The first prompt alone
// (1,500 characters) is past the 1,000-character budget and every two prompts are too, so a
// gauge above 0 and within the budget can only come from a round that evicted: without
// eviction any round after the first request would show more than 1,000, and eviction of the
// first alone leaves 0.
func TestCacheAwareTreesAreEvictedByTheShippedBinary(t *testing.T) {
	m := StartMocks(t, 2)
	g := StartGateway(t, "--policy", "cache_aware", "--worker-urls", m.URLs[0], m.URLs[1],
		"--max-tree-size", "1000", "--eviction-interval-secs", "1")
	for i := range 10 {
		n := 700
		if i == 0 {
			n = 1500
		}
		prompt := fmt.Sprintf("%c%s", 'a'+i, strings.Repeat(string(rune('a'+i)), n-1)) // distinct from the first byte
		if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chatWith(prompt), nil); r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	series := `smg_cache_tree_chars{model="mock-model"}`
	var chars float64
	testutil.Eventually(t, "the tree gauge set by a maintenance round that evicted", func() bool {
		chars, _ = Metric(t, g.MetricsURL, series)
		if chars > 1000 {
			t.Fatalf("%s = %v after a maintenance round: not cut back to --max-tree-size 1000", series, chars)
		}
		return chars > 0
	})
	t.Logf("cache_aware tree after 7,800 characters inserted: %v characters (budget 1,000)", chars)
}

// TestStickySessionsAndPinsAreForgottenByTheShippedBinary: the pins of --routing-key-override
// sessions and of the manual policy, one per routing key, are forgotten after --max-idle-secs
// by the shipped binary's maintenance (smg_manual_policy_cache_entries back to 0), and their
// per-worker key counts with them: a key seen again is a new pin.
func TestStickySessionsAndPinsAreForgottenByTheShippedBinary(t *testing.T) {
	m := StartMocks(t, 2)
	for _, args := range [][]string{
		{"--policy", "round_robin", "--routing-key-override"},
		{"--policy", "manual"},
	} {
		t.Run(args[1], func(t *testing.T) {
			g := StartGateway(t, append(args, "--worker-urls", m.URLs[0], m.URLs[1], "--max-idle-secs", "1")...)
			const keys = 12
			send := func() {
				for i := range keys {
					h := map[string]string{"X-SMG-Routing-Key": fmt.Sprintf("session-%d", i)}
					if r := MustDo(t, "POST", g.URL+"/v1/chat/completions", chatWith("hi"), h); r.Status != 200 {
						t.Fatalf("keyed request: %d %s", r.Status, r.Body)
					}
				}
			}
			entries := "smg_manual_policy_cache_entries"
			vacant := `smg_manual_policy_branch_total{branch="vacant"}`
			send()
			if v, _ := Metric(t, g.MetricsURL, entries); v != keys {
				t.Fatalf("%s = %v after %d keys, want %d", entries, v, keys, keys)
			}
			testutil.Eventually(t, "idle pins forgotten", func() bool {
				v, ok := Metric(t, g.MetricsURL, entries)
				return ok && v == 0
			})
			before, _ := Metric(t, g.MetricsURL, vacant)
			send() // the same keys again: pinned anew, since they were forgotten
			after, _ := Metric(t, g.MetricsURL, vacant)
			if after-before != keys {
				t.Fatalf("%v of %d keys seen again were new pins, want all", after-before, keys)
			}
		})
	}
}
