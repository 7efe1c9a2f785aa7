package main

import (
	"fmt"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/worker"
)

// epdOptions are the flags of encode-prefill-decode disaggregation (spec: load-balancing.md,
// PD and EPD Legs; service-discovery.md, PD Disaggregation Discovery). EPD mode is PD mode
// with a third leg: validateEPD turns PD mode on, so --prefill, --decode and their policies
// apply unchanged.
type epdOptions struct {
	enabled bool
	encode  []worker.Spec
	policy  string
}

func registerEPDFlags(fs *cli.FlagSet, o *epdOptions) {
	fs.Bool("epd-disaggregation", &o.enabled, false, "Encode-prefill-decode disaggregation: PD mode, and multimodal requests first go to an encode worker")
	fs.Occurrences("encode", 1, 2, "URL [BOOTSTRAP_PORT|none]", "An encode worker and its bootstrap port (none: the engine's default); repeat for more", bootstrapWorker(worker.TypeEncode, &o.encode))
	fs.String("encode-policy", &o.policy, all.DefaultEncodePolicy, "Policy of the encode leg: random, round_robin or consistent_hashing").WithMetavar("POLICY")
}

// validateEPD checks the EPD flags and, in EPD mode, turns PD mode on. It runs before
// validatePD, which then checks --prefill, --decode and their policies.
func (o *options) validateEPD(fs *cli.FlagSet) error {
	e := &o.pd.epd
	if !e.enabled {
		for _, f := range []string{"encode", "encode-policy", "encode-selector"} {
			if fs.IsSet(f) {
				return fmt.Errorf("--%s needs --epd-disaggregation", f)
			}
		}
		return nil
	}
	o.pd.enabled = true
	p, err := all.EncodePolicy(e.policy)
	if err != nil {
		return err
	}
	e.policy = p
	if o.disc.Enabled && (len(o.disc.EncodeSelector) == 0 || len(o.disc.PrefillSelector) == 0 || len(o.disc.DecodeSelector) == 0) {
		return fmt.Errorf("--epd-disaggregation with --service-discovery needs all three role selectors: --encode-selector, --prefill-selector and --decode-selector")
	}
	for i := range e.encode {
		if err := e.encode[i].Normalize(); err != nil {
			return fmt.Errorf("--encode: %w", err)
		}
	}
	return nil
}

// checkWorkerType refuses a worker API registration whose type the gateway's mode cannot
// route, saying which types it takes.
func (pd *pdOptions) checkWorkerType(t string) error {
	switch {
	case pd.epd.enabled:
		if t != worker.TypeEncode && t != worker.TypePrefill && t != worker.TypeDecode {
			return fmt.Errorf("the gateway runs in EPD mode (--epd-disaggregation): register the worker with \"worker_type\": \"encode\", \"prefill\" or \"decode\"")
		}
	case pd.enabled:
		if t != worker.TypePrefill && t != worker.TypeDecode {
			return fmt.Errorf("the gateway runs in PD mode (--pd-disaggregation): register the worker with \"worker_type\": \"prefill\" or \"decode\"")
		}
	}
	return nil
}
