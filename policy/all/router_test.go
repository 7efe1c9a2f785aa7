package all

import (
	"testing"

	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/cacheaware"
	"github.com/smg-go/smg/policy/leastload"
	"github.com/smg-go/smg/policy/policytest"
	"github.com/smg-go/smg/policy/prefixhash"
)

// TestPerModelPoliciesFromLabels checks the spec's Policy Scope with this package's builders:
// the first worker of a model decides its policy through its "policy" label; a label naming
// --policy gets the flags, another policy its built-in defaults; the model keeps its policy
// until its last worker leaves.
func TestPerModelPoliciesFromLabels(t *testing.T) {
	// 0.8: a flag value the label-built instances must not get.
	nb := builders(t, func(c *Config) { c.CacheAware.CacheThreshold = 0.8 })
	r, err := policy.NewRouter(policy.RouterConfig{DefaultPolicy: cacheaware.Name, NewBuilder: nb})
	if err != nil {
		t.Fatal(err)
	}
	f := policytest.NewFleet(t, 0, "")
	a1 := f.Add("a", map[string]string{policy.LabelPolicy: leastload.Name})
	f.Add("a", map[string]string{policy.LabelPolicy: prefixhash.Name}) // not first: ignored
	f.Add("b", nil)
	f.Add("c", map[string]string{policy.LabelPolicy: cacheaware.Name})
	f.Add("d", map[string]string{policy.LabelPolicy: "bucket"}) // refused outside PD: default
	r.Update(f.Reg.Current())
	want := map[string]string{"a": leastload.Name, "b": cacheaware.Name, "c": cacheaware.Name, "d": cacheaware.Name}
	for model, name := range want {
		route, ok := r.Current().Lookup([]byte(model))
		if !ok || route.Policy != name {
			t.Fatalf("model %s: route %+v, want policy %s", model, route, name)
		}
		if _, err := route.Picker.Pick(&policy.Request{Text: []byte("hi")}); err != nil {
			t.Fatalf("model %s: %v", model, err)
		}
	}
	// c's label names --policy: it gets the flags (0.8); b uses --policy itself: flags too.
	// A label naming cache_aware under another --policy would get the built-in 0.5, which
	// TestFromFlagsOrBuiltinDefaults covers.
	// The model keeps its policy while a worker remains, even if the deciding worker leaves.
	f.Remove(a1)
	r.Update(f.Reg.Current())
	if route, _ := r.Current().Lookup([]byte("a")); route.Policy != leastload.Name {
		t.Fatalf("model a changed policy to %s while a worker remained", route.Policy)
	}
}
