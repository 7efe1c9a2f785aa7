package discovery

import (
	"fmt"
	"sort"
	"strings"
)

// Selector is an equality-based label selector: every key=value pair must match (spec: Label
// Selectors, "Multiple Labels"). The empty selector matches every pod.
type Selector map[string]string

// ParseSelector parses key=value pairs as --selector takes them. Each argument may also hold
// several pairs separated by commas, as kubectl writes them.
func ParseSelector(pairs []string) (Selector, error) {
	sel := Selector{}
	for _, arg := range pairs {
		for _, pair := range strings.Split(arg, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" || strings.ContainsAny(k, "=!") || strings.Contains(v, "=") {
				return nil, fmt.Errorf("invalid selector %q: give key=value pairs such as app=sglang-worker", pair)
			}
			if prev, dup := sel[k]; dup && prev != v {
				return nil, fmt.Errorf("invalid selector: key %q is given twice (%q and %q); a pod label has one value", k, prev, v)
			}
			sel[k] = v
		}
	}
	return sel, nil
}

// Matches reports whether labels carry every pair of the selector.
func (s Selector) Matches(labels map[string]string) bool {
	for k, v := range s {
		got, ok := labels[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}

// String renders the selector as the Kubernetes API expects it: k1=v1,k2=v2 in key order.
func (s Selector) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(s[k])
	}
	return b.String()
}

// Common returns the pairs every given selector shares. Sent to the API server when several
// role selectors are watched through one informer, it narrows the cache to candidates while
// the exact role match still happens locally.
func Common(sels ...Selector) Selector {
	out := Selector{}
	if len(sels) == 0 {
		return out
	}
	for k, v := range sels[0] {
		shared := true
		for _, s := range sels[1:] {
			if got, ok := s[k]; !ok || got != v {
				shared = false
				break
			}
		}
		if shared {
			out[k] = v
		}
	}
	return out
}
