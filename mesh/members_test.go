package mesh

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/smg-go/smg/internal/testutil"
	"github.com/smg-go/smg/mesh/wire"
)

// TestStatusTableLoggedAtInfoOnlyWhenItChanges: the "Status:" table is an INFO line in the
// rounds it changed (so the spec's `grep 'Status:' | tail -n 1` shows the current table) and
// a DEBUG line in the others.
func TestStatusTableLoggedAtInfoOnlyWhenItChanges(t *testing.T) {
	log, logs := testutil.Logger(slog.LevelDebug)
	c := newTunedCluster(t, 3, func(cfg *Config, deps *Deps) {
		if cfg.ServerName == "r00" {
			deps.Logger = log
		}
	})
	c.roundsUntil(t, 5, "membership", func() bool { return c.allAlive(seq(3)) })
	for range 5 {
		c.net.round()
	}
	c.net.kill(c.addrs[2])
	c.roundsUntil(t, 30, "DOWN", func() bool { return c.statusEverywhere([]int{0, 1}, "r02", wire.StatusDown) })
	for range 10 {
		c.net.round()
	}

	var info, debug []string
	for _, l := range testutil.Lines(logs, `msg="Status:`) {
		switch {
		case strings.Contains(l, "level=INFO"):
			info = append(info, l)
		case strings.Contains(l, "level=DEBUG"):
			debug = append(debug, l)
		}
	}
	if len(info) < 3 || !strings.Contains(info[len(info)-1], "r02@"+c.addrs[2]+"=DOWN") {
		t.Fatalf("want an INFO table per change (joins, SUSPECTED, DOWN), the last with r02 DOWN; got:\n%s", strings.Join(info, "\n"))
	}
	for i := 1; i < len(info); i++ {
		if tableOf(info[i]) == tableOf(info[i-1]) {
			t.Fatalf("the same table logged twice at INFO:\n%s\n%s", info[i-1], info[i])
		}
	}
	if len(debug) < 10 {
		t.Fatalf("want the unchanged rounds' tables at DEBUG, got %d lines", len(debug))
	}
}

func tableOf(line string) string { return line[strings.Index(line, "Status:"):] }

// TestRouterRestartedUnderAnotherNameIsForgotten: a router that comes back at the same address
// under a new name (a random pod name) replaces the old one: every router forgets the old
// name, its per-peer metric series go with it, and gossip from a router that still lists it
// does not bring it back.
func TestRouterRestartedUnderAnotherNameIsForgotten(t *testing.T) {
	sets := map[string]*metrics.Set{}
	c := newTunedCluster(t, 3, func(cfg *Config, deps *Deps) {
		deps.Metrics = metrics.NewSet()
		sets[cfg.ServerName] = deps.Metrics
	})
	c.roundsUntil(t, 5, "membership", func() bool { return c.allAlive(seq(3)) })
	// The name that sorts first opens a pair's stream: r02 accepts r00's (and reports its
	// connection), r00 reports its round durations to r02.
	c.roundsUntil(t, 5, "r02's series", func() bool {
		return hasSeries(sets["r00"], `{peer="r02"}`) && hasSeries(sets["r02"], `{peer="r00"}`)
	})

	c.net.kill(c.addrs[2])
	c.roundsUntil(t, 30, "DOWN", func() bool { return c.statusEverywhere([]int{0, 1}, "r02", wire.StatusDown) })
	if !hasSeries(sets["r00"], `{peer="r02"}`) {
		t.Fatal("r02's series are gone while it is only DOWN: a DOWN router's alerts need them")
	}

	c.net.add("r02-new", c.addrs[2], 99, c.addrs[0])
	c.roundsUntil(t, 10, "the old name forgotten", func() bool {
		for _, i := range []int{0, 1} {
			if _, ok := c.view(i)["r02"]; ok || c.view(i)["r02-new"].Status != wire.StatusAlive {
				return false
			}
		}
		_, ok := c.view(2)["r02"]
		return !ok
	})
	if hasSeries(sets["r00"], `{peer="r02"}`) {
		t.Fatal("r00 still exports series of the forgotten r02")
	}
	// A peer that still gossips the old row (as a router that missed the restart would) does
	// not bring it back.
	c.node(0).merge([]wire.Member{{Name: "r02", Addr: c.addrs[2], Status: wire.StatusDown, Incarnation: 1}})
	if _, ok := c.view(0)["r02"]; ok {
		t.Fatal("a gossiped DOWN row of the forgotten name came back into the table")
	}
	for range 5 {
		c.net.round()
	}
	if !c.allAlive([]int{0, 1}) || len(c.node(0).Members()) != 3 {
		t.Fatalf("after the restart r00 sees %v", c.node(0).Members())
	}
}

func hasSeries(set *metrics.Set, label string) bool {
	var b bytes.Buffer
	set.WritePrometheus(&b)
	return strings.Contains(b.String(), label)
}
