package policy

import "github.com/VictoriaMetrics/metrics"

// RandOr returns rnd, or RuntimeRand when rnd is nil: the source a policy's New draws from.
func RandOr(rnd Rand) Rand {
	if rnd == nil {
		return RuntimeRand{}
	}
	return rnd
}

// MetricsOr returns set, or a private set when set is nil: where a policy's New registers
// its series.
func MetricsOr(set *metrics.Set) *metrics.Set {
	if set == nil {
		return metrics.NewSet()
	}
	return set
}

// BranchCounters returns the maker of the counters of a policy's branch metric name
// (smg_<policy>_policy_branch_total) in set: one counter per branch label value.
func BranchCounters(set *metrics.Set, name string) func(branch string) *metrics.Counter {
	return func(branch string) *metrics.Counter {
		return set.GetOrCreateCounter(name + `{branch="` + branch + `"}`)
	}
}
