package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/smg-go/smg/worker"
)

func TestEPDCommandLines(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--encode http://e:1", "--encode needs --epd-disaggregation"},
		{"--encode-policy random", "--encode-policy needs --epd-disaggregation"},
		{"--pd-disaggregation --prefill http://p:1 --decode http://d:1 --encode http://e:1", "--encode needs --epd-disaggregation"},
		{"--encode-selector app=e", "--encode-selector needs --epd-disaggregation"},
		{"--epd-disaggregation --encode http://e:1 --prefill http://p:1 --decode http://d:1 --encode-policy cache_aware", `--encode-policy "cache_aware": the encode leg takes random, round_robin or consistent_hashing`},
		{"--epd-disaggregation --encode http://e:1 70000 --prefill http://p:1 --decode http://d:1", "not a port in 1-65535 or none"},
		{"--epd-disaggregation --encode ftp://e:1 --prefill http://p:1 --decode http://d:1", "--encode:"},
		{"--epd-disaggregation --worker-urls http://w:1", "--worker-urls cannot be used with --pd-disaggregation or --epd-disaggregation"},
		{"--epd-disaggregation --encode http://e:1 --prefill http://p:1 --decode http://d:1 --decode-policy bucket", "--decode-policy bucket"},
		{"--epd-disaggregation --service-discovery --prefill-selector role=p --decode-selector role=d", "needs all three role selectors"},
	} {
		var out, errb bytes.Buffer
		if code := run(strings.Fields(tc.args), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want it to contain %q", tc.args, code, errb.String(), tc.want)
		}
	}
	// The spec's command line parses: EPD mode is PD mode with an encode leg, whose policy
	// defaults to consistent_hashing.
	var o options
	fs := newFlagSet(&o)
	args := "--epd-disaggregation --encode http://e1:8000 9100 --encode http://e2:8000 --prefill http://p1:8000 9001 --decode http://d1:8000 --policy round_robin"
	if err := fs.Parse(strings.Fields(args)); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(fs); err != nil {
		t.Fatal(err)
	}
	specs := o.staticSpecs()
	if len(specs) != 4 || specs[0].WorkerType != worker.TypeEncode || specs[0].Labels[worker.LabelBootstrapPort] != "9100" || specs[1].Labels != nil ||
		specs[2].WorkerType != worker.TypePrefill || specs[3].WorkerType != worker.TypeDecode {
		t.Fatalf("specs %+v", specs)
	}
	if !o.pd.enabled || o.pd.legs != (struct{ Prefill, Decode, Encode string }{"round_robin", "round_robin", "consistent_hashing"}) {
		t.Fatalf("PD mode %v, legs %+v", o.pd.enabled, o.pd.legs)
	}
	for typ, ok := range map[string]bool{worker.TypeEncode: true, worker.TypePrefill: true, worker.TypeDecode: true, worker.TypeRegular: false} {
		if err := o.pd.checkWorkerType(typ); (err == nil) != ok {
			t.Errorf("worker_type %s in EPD mode: %v", typ, err)
		}
	}
	o.pd.epd.enabled = false
	if err := o.pd.checkWorkerType(worker.TypeEncode); err == nil || !strings.Contains(err.Error(), `"prefill" or "decode"`) {
		t.Errorf("worker_type encode in PD mode: %v", err)
	}
}
