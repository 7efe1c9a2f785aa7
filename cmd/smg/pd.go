package main

import (
	"fmt"
	"strconv"

	"github.com/smg-go/smg/internal/cli"
	"github.com/smg-go/smg/policy"
	"github.com/smg-go/smg/policy/all"
	"github.com/smg-go/smg/policy/poweroftwo"
	"github.com/smg-go/smg/worker"
)

// pdOptions are the flags of prefill-decode disaggregation (spec: load-balancing.md, Bucket and
// PD and EPD Legs).
type pdOptions struct {
	enabled       bool
	prefill       []worker.Spec
	decode        []string
	prefillPolicy string
	decodePolicy  string
	kvConnector   string
	// legs is the resolved leg policies (validate fills it).
	legs policy.PDPolicies
	// epd holds the EPD flags; EPD mode turns PD mode on (epd.go).
	epd epdOptions
}

// bootstrapWorker parses one --prefill or --encode occurrence, URL [BOOTSTRAP_PORT|none],
// into a worker of type typ appended to dst.
func bootstrapWorker(typ string, dst *[]worker.Spec) func(words []string) error {
	return func(words []string) error {
		spec := worker.Spec{URL: words[0], WorkerType: typ}
		if len(words) == 2 && words[1] != "none" {
			if n, err := strconv.Atoi(words[1]); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("bootstrap port %q is not a port in 1-65535 or none", words[1])
			}
			spec.Labels = map[string]string{worker.LabelBootstrapPort: words[1]}
		}
		*dst = append(*dst, spec)
		return nil
	}
}

func registerPDFlags(fs *cli.FlagSet, o *pdOptions) {
	fs.Bool("pd-disaggregation", &o.enabled, false, "Prefill-decode disaggregation: every request goes to a prefill and a decode worker")
	fs.Occurrences("prefill", 1, 2, "URL [BOOTSTRAP_PORT|none]", "A prefill worker and its KV bootstrap port (none: the engine's default); repeat for more", bootstrapWorker(worker.TypePrefill, &o.prefill))
	fs.StringList("decode", &o.decode, "Decode worker URLs; the flag may repeat").WithMetavar("URL")
	fs.String("prefill-policy", &o.prefillPolicy, "", "Policy of the prefill leg (default: --policy); bucket fits here").WithMetavar("POLICY")
	fs.String("decode-policy", &o.decodePolicy, "", "Policy of the decode leg (default: --policy); not bucket or passthrough").WithMetavar("POLICY")
	fs.String("kv-connector", &o.kvConnector, "", "vLLM KV connector (NixlConnector, MooncakeConnector) of the --prefill and --decode workers; empty: SGLang's bootstrap protocol").WithMetavar("CONNECTOR")
	registerEPDFlags(fs, &o.epd)
}

// validatePD checks the PD flags against the rest of the command line and resolves the leg
// policies.
func (o *options) validatePD(fs *cli.FlagSet) error {
	pd := &o.pd
	if !pd.enabled {
		for _, f := range []string{"prefill", "decode", "prefill-policy", "decode-policy", "kv-connector", "prefill-selector", "decode-selector"} {
			if fs.IsSet(f) {
				return fmt.Errorf("--%s needs --pd-disaggregation", f)
			}
		}
		return nil
	}
	if len(o.workerURLs) > 0 {
		return fmt.Errorf("--worker-urls cannot be used with --pd-disaggregation or --epd-disaggregation: give prefill workers with --prefill URL [BOOTSTRAP_PORT|none] and decode workers with --decode URL")
	}
	legs, err := all.PDPolicies(o.policy, pd.prefillPolicy, pd.decodePolicy)
	if err != nil {
		return err
	}
	if pd.epd.enabled {
		legs.Encode = pd.epd.policy // an encode leg makes the router's tables EPD tables
	}
	pd.legs = legs
	if o.disc.Enabled && len(o.disc.PrefillSelector) == 0 && len(o.disc.DecodeSelector) == 0 {
		return fmt.Errorf("--pd-disaggregation with --service-discovery needs --prefill-selector and/or --decode-selector")
	}
	// Outside IGW mode a leg given power_of_two needs two workers to compare (spec).
	if !o.enableIGW {
		if pd.prefillPolicy == poweroftwo.Name && len(pd.prefill) < 2 {
			return fmt.Errorf("--prefill-policy power_of_two needs at least two --prefill workers (got %d): add one, or choose another policy", len(pd.prefill))
		}
		if pd.decodePolicy == poweroftwo.Name && len(pd.decode) < 2 {
			return fmt.Errorf("--decode-policy power_of_two needs at least two --decode workers (got %d): add one, or choose another policy", len(pd.decode))
		}
	}
	switch pd.kvConnector {
	case "", "NixlConnector", "MooncakeConnector":
	default:
		return fmt.Errorf("--kv-connector %q: give NixlConnector or MooncakeConnector, or leave it out for SGLang workers", pd.kvConnector)
	}
	for i := range pd.prefill {
		if err := pd.prefill[i].Normalize(); err != nil {
			return fmt.Errorf("--prefill: %w", err)
		}
	}
	for i, u := range pd.decode {
		c, err := worker.CanonicalURL(u)
		if err != nil {
			return fmt.Errorf("--decode: %w", err)
		}
		pd.decode[i] = c
	}
	return nil
}

// staticSpecs are the workers of the command line: --worker-urls, or --prefill and --decode.
func (o *options) staticSpecs() []worker.Spec {
	var specs []worker.Spec
	for _, u := range o.workerURLs {
		specs = append(specs, worker.Spec{URL: u})
	}
	specs = append(specs, o.pd.epd.encode...)
	specs = append(specs, o.pd.prefill...)
	for _, u := range o.pd.decode {
		specs = append(specs, worker.Spec{URL: u, WorkerType: worker.TypeDecode})
	}
	if c := o.pd.kvConnector; c != "" {
		for i := range specs {
			labels := map[string]string{worker.LabelKVConnector: c}
			for k, v := range specs[i].Labels {
				labels[k] = v
			}
			specs[i].Labels = labels
		}
	}
	return specs
}
