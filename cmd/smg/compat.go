package main

import (
	"log/slog"
	"strings"

	"github.com/smg-go/smg/discovery"
	"github.com/smg-go/smg/internal/cli"
)

// The spec product's command lines that SMG-Go refuses say what to run instead;
// the flags it accepts without the spec's effect are listed in docs/differences.md.

// serveRefusal answers `smg serve`: the spec's serve launches engines beside the gateway.
const serveRefusal = "smg serve launches SGLang engines beside the gateway, and SMG-Go launches no engines. " +
	"Start the engines yourself (python -m sglang.launch_server --model-path MODEL --port 8000, one per GPU or data-parallel rank) " +
	"and run 'smg launch --worker-urls http://HOST:8000 ...'; serve's --router-* flags are launch's flags without the prefix " +
	"(--router-policy is --policy, --router-enable-mesh is --enable-mesh)"

// refuseSpecFlags registers the spec flags `smg launch` refuses, and explains serve's
// --router-* spellings.
func refuseSpecFlags(fs *cli.FlagSet) {
	fs.Refuse("data-parallel-size", "this is smg serve's flag (the engine ranks it launches), and SMG-Go launches no engines: "+
		"start one engine per rank yourself and list each with --worker-urls")
	fs.UnknownHint = func(name string) string {
		if rest, ok := strings.CutPrefix(name, "router-"); ok && fs.Lookup(rest) != nil {
			return "the --router- prefix is smg serve's spelling, which SMG-Go does not run; smg launch takes --" + rest
		}
		return ""
	}
}

// logCompatNotes says at start-up what accepted spec flags do not do here, and why a flag
// has no effect.
func logCompatNotes(o *options, log *slog.Logger) {
	if dir := o.tokenizerDir(); dir != "" && !isDir(dir) {
		log.Info("--model-path is not a local directory and SMG-Go downloads nothing from a model hub: each gRPC engine's tokenizer is fetched from the engine (GetTokenizer); HTTP workers are routed on the request text", "model_path", dir)
	}
	// Without discovery k8s.Start never runs, so the spec's warning is logged here.
	if on, msg := o.disc.RouterDiscoveryEnabled(); !on && msg == discovery.LogRouterNeedsDiscover {
		log.Warn(msg)
	}
}
