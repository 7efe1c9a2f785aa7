package promlabel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

func TestQuoteEscapesWhatTheExpositionFormatEscapes(t *testing.T) {
	cases := map[string]string{
		"http://10.0.0.7:8000": `"http://10.0.0.7:8000"`,
		`a"b\c`:                `"a\"b\\c"`,
		"line\nfeed":           `"line\nfeed"`,
		"tab\there":            "\"tab\there\"", // a tab stays a tab (%q would write \t)
		"modèle":               `"modèle"`,      // UTF-8 stays UTF-8 (%q would write \u00e8)
		"":                     `""`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// The metrics library accepts every quoted value and writes it back unchanged.
func TestQuotedValuesRoundTripThroughTheMetricsLibrary(t *testing.T) {
	set := metrics.NewSet()
	for _, v := range []string{`a"b\c`, "line\nfeed", "modèle", `trailing\`} {
		name := `smg_test_total{worker=` + Quote(v) + `}`
		set.NewCounter(name).Inc()
		var b bytes.Buffer
		set.WritePrometheus(&b)
		if !strings.Contains(b.String(), name+" 1") {
			t.Fatalf("%s not exported as is:\n%s", name, b.String())
		}
	}
}
