package policytest

import (
	"strings"
	"testing"
)

// Zero is not "the default": an Engine or SimConfig not built from
// DefaultEngine/DefaultSimConfig is refused on every field whose zero makes no sense, each
// message saying where to start; the defaults themselves pass.
func TestZeroSimConfigIsRefused(t *testing.T) {
	err := SimConfig{Engines: []Engine{{}}}.Validate()
	for _, field := range []string{"ReportEvery", "PrefillTPS", "PrefillChunk", "DecodeBase", "KVTokens", "DecodeFactor",
		"policytest.DefaultEngine()", "policytest.DefaultSimConfig()"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("zero SimConfig: %v, want it to name %q", err, field)
		}
	}
	if err := DefaultSimConfig(DefaultEngines(3)).Validate(); err != nil {
		t.Fatalf("DefaultSimConfig: %v", err)
	}
	e := DefaultEngine()
	e.DecodePerReq, e.CacheGroups, e.CacheTokens = 0, 0, 0 // zeros with a meaning
	c := DefaultSimConfig([]Engine{e})
	c.Warmup = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("meaningful zeros refused: %v", err)
	}
}
