package worker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestSpecLimitsNameTheFieldAndTheBound: every string field and the label and model counts
// are bounded in Normalize, which every registration path runs; a spec exactly at every bound
// passes, one byte or entry past any refuses with the field and the bound in the error.
func TestSpecLimitsNameTheFieldAndTheBound(t *testing.T) {
	atBound := func() Spec {
		labels := map[string]string{}
		for i := range MaxLabels - 1 {
			labels[fmt.Sprintf("k%02d", i)] = "v"
		}
		labels[strings.Repeat("k", MaxLabelKeyBytes)] = strings.Repeat("v", MaxLabelValueBytes)
		models := make(ModelList, MaxModels-1)
		for i := range models {
			models[i] = fmt.Sprintf("m%03d", i)
		}
		ep := "/" + strings.Repeat("h", MaxEndpointBytes-1)
		prio := MaxPriority
		return Spec{URL: "http://10.0.0.1:8000/" + strings.Repeat("p", MaxURLBytes-len("http://10.0.0.1:8000/")),
			ModelID: strings.Repeat("m", MaxModelIDBytes), Models: models, Labels: labels, Priority: &prio,
			APIKey: strings.Repeat("a", MaxAPIKeyBytes), Health: &HealthOverride{Endpoint: &ep}}
	}
	s := atBound()
	if err := s.CheckLimits(); err != nil {
		t.Fatalf("a spec at every bound: %v", err)
	}
	cases := []struct {
		name, want string
		past       func(*Spec)
	}{
		{"url", "url is 2049 bytes, at most 2048", func(s *Spec) { s.URL += "p" }},
		{"model_id", "model_id is 1025 bytes, at most 1024", func(s *Spec) { s.ModelID += "m" }},
		{"models count", "models has 257 entries, at most 256", func(s *Spec) { s.Models = append(s.Models, "x", "y") }},
		{"one model", "models[3] is 1025 bytes, at most 1024", func(s *Spec) { s.Models[3] = strings.Repeat("m", 1025) }},
		{"labels count", "labels has 65 entries, at most 64", func(s *Spec) { s.Labels["extra"] = "v" }},
		{"label key", "bytes, at most 320", func(s *Spec) { s.Labels[strings.Repeat("q", 321)] = "v"; delete(s.Labels, "k00") }},
		{"label value", `labels["k01"] is 4097 bytes, at most 4096`, func(s *Spec) { s.Labels["k01"] = strings.Repeat("v", 4097) }},
		{"api_key", "api_key is 4097 bytes, at most 4096", func(s *Spec) { s.APIKey += "a" }},
		{"health.endpoint", "health.endpoint is 1025 bytes, at most 1024", func(s *Spec) { *s.Health.Endpoint += "h" }},
	}
	for _, c := range cases {
		s := atBound()
		c.past(&s)
		err := s.Normalize()
		if !errors.Is(err, ErrSpecTooLarge) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s past its bound: %v, want ErrSpecTooLarge with %q", c.name, err, c.want)
		}
	}
	for _, p := range []int{-1, MaxPriority + 1} {
		s := Spec{URL: "http://10.0.0.1:8000", Priority: &p}
		if err := s.Normalize(); err == nil || !strings.Contains(err.Error(), "must be in 0-4294967295") {
			t.Errorf("priority %d: %v", p, err)
		}
	}
}
